#!/usr/bin/env bash
# kill.sh — issue 20's lose-a-rank target on one machine: dml launch runs
# NP ranks; one rank is killed with SIGKILL in the middle of an epoch
# (DML_TEST_KILL, at step KILL); the survivors write their emergency
# checkpoint, dml launch relaunches on NP-1 ranks with --resume, and the
# run ends. Prints, per seed, the recovery time (from the death's report
# to the first step on the new world), the steps lost, and the final test
# accuracy against the same job run without a kill.
#
#   bench/elastic/kill.sh [DML_BINARY]        (default bin/dml)
#
# Environment: NP [4], KILL [600] (the step in flight when rank RANK dies),
# RANK [2], EPOCHS [5], SEEDS ["1 2"], MODEL [mlp], HIDDEN [256,128], DATA
# [fashion-mnist]. Exit 1 when a run lost more than one step, took more
# than 3 s to recover, or ended more than 0.01 below the run without a
# kill.
set -u
dml=${1:-bin/dml}
np=${NP:-4} kill=${KILL:-600} rank=${RANK:-2} epochs=${EPOCHS:-5}
seeds=${SEEDS:-1 2}
dir=$(mktemp -d /tmp/killbench.XXXXXX)
trap 'rm -rf "$dir"' EXIT
launcher="mpirun --oversubscribe --mca btl self,vader"
[ "$(id -u)" = 0 ] && launcher="$launcher --allow-run-as-root"
acc() { sed -n 's/^done: .*test accuracy \([0-9.]*\).*/\1/p' "$1" | tail -1; }
fail=0
echo "| seed | ranks | killed | recovery (s) | steps lost | test acc. | without kill | Δ |"
echo "|---|---|---|---|---|---|---|---|"
for seed in $seeds; do
	common=(train --model "${MODEL:-mlp}" --hidden "${HIDDEN:-256,128}" --data "${DATA:-fashion-mnist}"
		--epochs "$epochs" --batch 64 --lr 0.05 --seed "$seed" --progress never)
	rm -rf "$dir/ck0" "$dir/ck1" "$dir/killed"
	"$dml" launch --np "$np" --launcher "$launcher" -- "${common[@]}" --checkpoint-dir "$dir/ck0" >"$dir/plain.out" 2>"$dir/plain.err"
	DML_TEST_KILL="$rank:$kill:$dir/killed" "$dml" launch --np "$np" --min-np $((np - 1)) --max-restarts 1 \
		--launcher "$launcher" --report "$dir/rep.json" -- "${common[@]}" --checkpoint-dir "$dir/ck1" >"$dir/kill.out" 2>"$dir/kill.err"
	rc=$?
	a0=$(acc "$dir/plain.out") a1=$(acc "$dir/kill.out")
	read -r rec lost <<<"$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); a=r["attempts"][0]; print(round(a.get("recovery_sec",-1),2), r["steps_lost"])' "$dir/rep.json" 2>/dev/null || echo "- -")"
	d=$(python3 -c "print(f'{float(\"${a1:-0}\")-float(\"${a0:-0}\"):+.4f}')")
	echo "| $seed | $np → $((np - 1)) | rank $rank at step $kill | $rec | $lost | ${a1:--} | ${a0:--} | $d |"
	grep "^dml launch: restart" "$dir/kill.err" | sed 's/^/    /' >&2
	ok=$(python3 -c "print(int($rc == 0 and '$lost' not in ('-', '') and int('$lost') <= 1 and 0 <= float('$rec') <= 3 and float('${a1:-0}') >= float('${a0:-0}') - 0.01))")
	[ "$ok" = 1 ] || fail=1
done
exit $fail
