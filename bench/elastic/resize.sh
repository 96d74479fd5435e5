#!/usr/bin/env bash
# resize.sh — issue 20's resume-at-another-size target, measured: one
# checkpoint written in the middle of epoch 1 by a 2-rank job (and a
# 1-server, 2-worker ps job) is resumed on 2, 3 and 4 ranks (and on 1 and
# 2 servers with 2 and 3 workers); each resumed run's final test accuracy
# is compared with the uninterrupted run's, and the same-size resume's
# --save bytes with the uninterrupted run's.
#
#   bench/elastic/resize.sh [DML_BINARY]      (default bin/dml)
#
# Environment: EPOCHS [3], STEP [200] (the checkpoint's step, in epoch 1:
# 469 steps per epoch on 2 ranks × batch 64), MODEL [mlp], DATA
# [fashion-mnist]. Prints a markdown table; exit 1 when a resumed run is
# more than 0.01 below the uninterrupted one or the same-size resume is
# not byte-identical.
set -u
dml=${1:-bin/dml}
epochs=${EPOCHS:-3}
step=${STEP:-200}
model=${MODEL:-mlp}
data=${DATA:-fashion-mnist}
mpirun=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader)
dir=$(mktemp -d /tmp/resize.XXXXXX)
trap 'rm -rf "$dir"' EXIT
common=(train --model "$model" --data "$data" --epochs "$epochs" --batch 64 --seed 1)
fail=0

# acc LOG: the final test accuracy a run printed.
acc() { sed -n 's/^done: .*test accuracy \([0-9.]*\).*/\1/p' "$1" | tail -1; }

# run NAME NP FLAGS...: one job, its output in $dir/NAME.log.
run() {
	local name=$1 np=$2
	shift 2
	if ! "${mpirun[@]}" -np "$np" "$dml" "${common[@]}" "$@" >"$dir/$name.log" 2>&1; then
		echo "$name failed:" >&2
		tail -5 "$dir/$name.log" >&2
		fail=1
	fi
}

echo "| sync | written by | resumed on | final test accuracy | uninterrupted | difference | same bytes |"
echo "|---|---|---|---|---|---|---|"
for sync in allreduce ps; do
	if [ "$sync" = ps ]; then
		flags=(--sync ps --consistency bsp --servers 1)
		np0=3
		sizes=("1 3" "2 4" "1 4" "2 5")
	else
		flags=()
		np0=2
		sizes=("- 2" "- 3" "- 4")
	fi
	run "$sync-straight" $np0 "${flags[@]}" --save "$dir/$sync-straight.npz"
	want=$(acc "$dir/$sync-straight.log")
	run "$sync-ckpt" $np0 "${flags[@]}" --checkpoint-dir "$dir/$sync-ck" --max-steps "$step"
	ck=$(ls "$dir/$sync-ck"/ckpt-*.npz | tail -1)
	for s in "${sizes[@]}"; do
		read -r servers np <<<"$s"
		f=("${flags[@]}")
		label="$np ranks"
		if [ "$sync" = ps ]; then
			f=(--sync ps --consistency bsp --servers "$servers")
			label="$servers server(s), $((np - servers)) workers"
		fi
		name="$sync-$servers-$np"
		run "$name" "$np" "${f[@]}" --resume "$ck" --save "$dir/$name.npz"
		got=$(acc "$dir/$name.log")
		same="–"
		if [ "$np" = "$np0" ] && [ "$servers" = "1" -o "$sync" = allreduce ]; then
			if cmp -s "$dir/$name.npz" "$dir/$sync-straight.npz"; then same=yes; else same=NO; fail=1; fi
		fi
		diff=$(awk -v a="$got" -v b="$want" 'BEGIN { printf "%+.4f", a - b }')
		if awk -v d="$diff" 'BEGIN { exit !(d < -0.01) }'; then fail=1; fi
		written="$np0 ranks"
		[ "$sync" = ps ] && written="1 server, 2 workers"
		echo "| $sync | $written, step $step | $label | $got | $want | $diff | $same |"
	done
done
echo
echo "- $model on $data, batch 64 per rank, $epochs epochs, seed 1; checkpoint at step $step of epoch 1; $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
exit $fail
