#!/usr/bin/env bash
# cluster-kill.sh — issue 20's kill-a-host target on the test cluster
# (bench/cluster: network namespaces joined by shaped links, mpirun over
# TCP): dml launch runs one rank on each of HOSTS hosts; once epoch 2 has
# ended, every dml process of host KILL is killed with SIGKILL. The
# survivors write their emergency checkpoint, dml launch leaves the host
# out for --cooldown and goes on with the others; when the cool-down ends
# the host is taken in again at a step boundary. Prints the restart and
# growth lines, the recovery time, the steps lost and the final test
# accuracy against the same job on the same cluster without a kill.
#
#   bench/elastic/cluster-kill.sh [DML_BINARY]      (default bin/dml; root)
#
# Environment: MODE [kill] (or cut: host KILL's link is set down instead,
# its processes left running; the liveness ring finds it silent after dml
# launch's --liveness, 3 s, and the link comes up again once the job has
# gone on without it), HOSTS [4], KILL [3] (the host; one rank per host,
# so rank KILL-1), LINK [10gbit], EPOCHS [6], COOLDOWN [6s] (0: the host does not
# come back), SEEDS ["1"], MODEL/HIDDEN/DATA as kill.sh, LIVENESS (dml
# launch's --liveness; its default when empty). Exit 1 when a run
# lost more than one step, took more than 3 s to recover, or ended more
# than 0.01 below the run without a kill. QUICK=1 (TestCluster's short
# version): synthetic data, a 2 s cool-down, no run without a kill, and
# only what the job did is checked (a restart, at most one step lost, the
# host taken back), not how fast: the job is given 1000 epochs and stopped
# with SIGINT (a checkpoint, exit 130) once the host is back, so that a
# fast machine cannot end it before the cool-down does (issue 29: 8
# epochs ended first on a quiet machine). SYNC=ps: the
# job runs --sync ps --servers 2 (bsp; ranks 0 and 1, on hosts 1 and 2,
# serve): kill host 2 (KILL=2) and server rank 1's key range comes back
# from server rank 0's replica (--replicate-every, on by default with
# --checkpoint-dir), written in its emergency checkpoint.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
dml=$(realpath "${1:-bin/dml}")
here=$repo/bench/cluster
. "$here/lib.sh"
hosts=${HOSTS:-4} victim=${KILL:-3} epochs=${EPOCHS:-6} cooldown=${COOLDOWN:-6s}
quick=${QUICK:-0}
data=(--data "${DATA:-fashion-mnist}")
if [ "$quick" = 1 ]; then
	epochs=${EPOCHS:-1000} cooldown=${COOLDOWN:-2s}
	LIVENESS=${LIVENESS:-3s} # no false death while the tests load the machine
	data=(--data synthetic --samples 20000 --features 64 --classes 4)
fi
name=dmlk$$
dir=$(mktemp -d /tmp/clusterkill.XXXXXX)
state=$("$here/up.sh" "$hosts" --name "$name" --link "${LINK:-10gbit}")
trap '"$here/down.sh" "$name" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
export DML_CLUSTER_DIR=$state
hostlist=$(awk '{print $1 ":1"}' "$state/hostfile" | paste -sd, -)
launcher="mpirun --oversubscribe --mca plm_rsh_agent $here/agent.sh --mca btl self,tcp
	--mca btl_tcp_if_include $DML_CLUSTER_SUBNET.0/24 --mca oob_tcp_if_include $DML_CLUSTER_SUBNET.0/24
	--mca pml ob1 --mca osc ^ucx --mca btl_tcp_links 1 -x DML_CLUSTER_DIR"
[ "$(id -u)" != 0 ] || launcher="$launcher --allow-run-as-root"
acc() { sed -n 's/^done: .*test accuracy \([0-9.]*\).*/\1/p' "$1" 2>/dev/null | tail -1; }
fail=0
echo "cluster $name: $hosts hosts over ${LINK:-10gbit}, one rank each, --sync ${SYNC:-allreduce}; host $victim ${MODE:-kill} after epoch 2" >&2
echo "| seed | recovery (s, from the ${MODE:-kill}) | steps lost | back after cool-down | test acc. | without kill | Δ |"
echo "|---|---|---|---|---|---|---|"
for seed in ${SEEDS:-1}; do
	common=(train --model "${MODEL:-mlp}" --hidden "${HIDDEN:-256,128}" "${data[@]}"
		--epochs "$epochs" --batch 64 --lr 0.05 --seed "$seed" --progress never)
	[ "${SYNC:-allreduce}" != ps ] || common+=(--sync ps --servers 2)
	rm -rf "$dir/ck0" "$dir/ck1"
	[ "$quick" = 1 ] || ip netns exec "$name-sw" "$dml" launch --hosts "$hostlist" --launcher "$launcher" -- \
		"${common[@]}" --checkpoint-dir "$dir/ck0" >"$dir/plain.out" 2>"$dir/plain.err" || true
	ip netns exec "$name-sw" "$dml" launch --hosts "$hostlist" --min-np $((hosts - 1)) --max-restarts 1 ${LIVENESS:+--liveness "$LIVENESS"} \
		--cooldown "$cooldown" --discover-every 1s --launcher "$launcher" --report "$dir/rep.json" -- \
		"${common[@]}" --checkpoint-dir "$dir/ck1" >"$dir/kill.out" 2>"$dir/kill.err" &
	job=$!
	until grep -q "^epoch   2" "$dir/kill.out" 2>/dev/null; do
		kill -0 $job 2>/dev/null || break
		sleep 0.05
	done
	t0=$(date +%s.%N)
	if [ "${MODE:-kill}" = cut ]; then
		ip -n "$name-h$victim" link set eth0 down
		until grep -q "^dml launch: restart 1" "$dir/kill.err" 2>/dev/null; do
			kill -0 $job 2>/dev/null || break
			sleep 0.05
		done
		ip -n "$name-h$victim" link set eth0 up
	else
		for p in $(ip netns pids "$name-h$victim"); do
			[ "$(cat /proc/$p/comm 2>/dev/null)" = dml ] && kill -9 "$p" || true
		done
	fi
	if [ "$quick" = 1 ]; then
		until grep -q "^dml launch: grew" "$dir/kill.err" 2>/dev/null; do
			kill -0 $job 2>/dev/null || break
			sleep 0.05
		done
		# One epoch on the grown job, then the stop.
		n=$(grep -c "^epoch" "$dir/kill.out" 2>/dev/null || true)
		until [ "$(grep -c "^epoch" "$dir/kill.out" 2>/dev/null || true)" -gt "${n:-0}" ]; do
			kill -0 $job 2>/dev/null || break
			sleep 0.05
		done
		kill -INT $job 2>/dev/null || true
	fi
	rc=0
	wait $job || rc=$?
	a0=$(acc "$dir/plain.out") a1=$(acc "$dir/kill.out")
	# The recovery from the kill (or cut) itself to the first step on the
	# hosts left: the death's detection included.
	read -r rec lost grew <<<"$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); a=r["attempts"]; print(round(a[1]["first_step_at"]-float(sys.argv[2]),2), r["steps_lost"], r.get("grown",0))' "$dir/rep.json" "$t0" 2>/dev/null || echo "- - -")"
	d=$(python3 -c "print(f'{float(\"${a1:-0}\")-float(\"${a0:-0}\"):+.4f}')")
	echo "| $seed | $rec | $lost | $([ "$grew" = 1 ] && echo yes || echo no) | ${a1:--} | ${a0:--} | $d |"
	[ -z "${REPORT:-}" ] || cp "$dir/rep.json" "$REPORT"
	grep "^dml launch: \(restart\|grew\|done\|stopped\)" "$dir/kill.err" | sed 's/^/    /' >&2
	if [ "$quick" = 1 ]; then
		ok=$(python3 -c "print(int($rc == 130 and '$lost' == '1' and '$grew' == '1'))")
	else
		ok=$(python3 -c "print(int($rc == 0 and '$lost' not in ('-', '') and int('$lost') <= 1 and 0 <= float('$rec') <= 3 and float('${a1:-0}') >= float('${a0:-0}') - 0.01))")
	fi
	[ "$ok" = 1 ] || { fail=1; tail -20 "$dir/kill.err" >&2; }
done
exit $fail
