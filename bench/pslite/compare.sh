#!/bin/bash
# Side-by-side table: ps-lite (pslite_bench, built by run.sh build) against
# `dml bench ps`, and optionally an older dml binary, each case run in turn
# (A/B alternating) ROUNDS times. Prints one line per run.
#
#   DML=bin/dml [DML_OLD=/tmp/dml-old] [ROUNDS=2] [MODEL=asp] [WAITS="backoff spin"] bench/pslite/compare.sh
#
# MODEL is dml's consistency model (default asp: ps-lite's server applies
# each push as it comes, with no barrier between workers; bsp adds one).
# WAITS lists the MPI wait policies (DML_MPI_WAIT) to run dml under: each
# gives its own dml line, labelled dml/POLICY (the old binary runs under
# the first); "nobell" is the back-off with its doorbells off
# (DML_MPI_BELLS=off: timed sleeps only).
# Cases: dense 235,146 and 4,000,000 floats with 1 and 2 workers; sparse
# 5,000 random keys of 1,000,000 with 1 and 2 workers; plain (push, then
# pull) and fused (one push+pull request); one server.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dml=${DML:-bin/dml}
old=${DML_OLD:-}
rounds=${ROUNDS:-2}
model=${MODEL:-asp}
read -r -a waits <<<"${WAITS:-backoff}"
mpirun=(mpirun --allow-run-as-root --oversubscribe)
lock=()
[ -e /work/shared-notes/measure.lock ] && lock=(flock /work/shared-notes/measure.lock)

iters() { # round trips for a case: about 1-2 s each
	case $1 in 235146) echo 400 ;; 4000000) echo 40 ;; *) echo 1000 ;; esac
}

run_dml() { # bin label kind size workers fused wait
	local bin=$1 label=$2 kind=$3 size=$4 workers=$5 fused=$6 wait=$7 args
	if [ "$kind" = dense ]; then args=(--params "$size"); else args=(--keys 5000 --of "$size"); fi
	[ "$fused" = fused ] && args+=(--fused)
	args+=(--consistency "$model")
	local bells=on name=$wait
	[ "$wait" = nobell ] && wait=backoff bells=off
	DML_MPI_WAIT=$wait DML_MPI_BELLS=$bells "${lock[@]}" "${mpirun[@]}" -x DML_MPI_WAIT -x DML_MPI_BELLS -np $((workers + 1)) "$bin" bench ps "${args[@]}" -n "$(iters "$size")" --format csv 2>&1 |
		awk -F, -v l="$label/$name" 'NR==2 { printf "%-14s %-20s W=%s %-9s %9.1f trips/s/worker  srvCPU %s wkrCPU %s\n", l, $1, $6, $4, $8, $12, $13 }'
}

run_pslite() { # kind size workers fused
	local kind=$1 size=$2 workers=$3 fused=$4 out
	if [ "$kind" = dense ]; then
		out=$(PSB_ITERS=$(iters "$size") "${lock[@]}" "$here/run.sh" dense "$size" "$workers" "$fused" 2>&1)
	else
		out=$(PSB_ITERS=$(iters "$size") "${lock[@]}" "$here/run.sh" sparse 5000 "$size" "$workers" "$fused" 2>&1)
	fi
	echo "$out" | awk -v k="$kind" -v s="$size" -v w="$workers" -v f="${fused:-plain}" '
		/round trips/ { for (i = 1; i <= NF; i++) if ($i == "round") { sum += $(i-1); n++ } }
		/server cpu/ { cpu = $4 }
		END { printf "%-14s %-20s W=%s %-9s %9.1f trips/s/worker  srvCPU %s\n", "ps-lite", k " " s, w, f, (n ? sum / n : 0), cpu }'
}

for r in $(seq "$rounds"); do
	for c in "dense 235146" "dense 4000000" "sparse 1000000"; do
		set -- $c
		for w in 1 2; do
			for f in "" fused; do
				run_pslite "$1" "$2" "$w" "$f"
				for p in "${waits[@]}"; do
					run_dml "$dml" dml "$1" "$2" "$w" "$f" "$p"
				done
				[ -n "$old" ] && [ -z "$f" ] && run_dml "$old" dml-old "$1" "$2" "$w" "$f" "${waits[0]}"
			done
		done
	done
done
