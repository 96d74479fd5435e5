#!/usr/bin/env bash
# shm.sh — what compression and local SGD cost where bytes are cheap: 2
# ranks on one machine (shared memory), the 784-1024³-10 MLP, each mode
# run in turn, ROUNDS times, samples/s of the training steps.
#
#   bench/compress/shm.sh [DML]      (default bin/dml; ROUNDS=3 STEPS=80)
set -euo pipefail
dml=${1:-bin/dml}
modes=("" "--compress fp16" "--compress bf16" "--compress fp16 --error-feedback" "--local-steps 4")
for r in $(seq "${ROUNDS:-3}"); do
	for m in "${modes[@]}"; do
		# shellcheck disable=SC2086
		line=$(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np 2 "$dml" train --hidden 1024,1024,1024 \
			--batch 256 --epochs 1 --max-steps "${STEPS:-80}" --eval-every 0 --progress never $m 2>&1 | grep '^done:')
		printf 'round %s  %-36s %s\n' "$r" "${m:-fp32}" "$line"
	done
done
