#!/usr/bin/env bash
# lenet.sh — issue 21's optimizer table on a CNN preset: LeNet-5 on
# Fashion-MNIST, 2 ranks × batch 64, EPOCHS epochs, SGD with momentum
# against AdamW with warm-up and cosine (and momentum with them), two seeds.
#
#   bench/optim/lenet.sh [DML]     (default bin/dml; EPOCHS=4, SEEDS="1 2")
set -euo pipefail
dml=${1:-bin/dml}
runs=("--optimizer momentum --lr 0.05"
	"--optimizer momentum --lr 0.05 --warmup-epochs 1 --lr-schedule cosine"
	"--optimizer adamw --lr 0.001 --weight-decay 0.01 --warmup-epochs 1 --lr-schedule cosine")
for seed in ${SEEDS:-1 2}; do
	for f in "${runs[@]}"; do
		# shellcheck disable=SC2086
		line=$(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np 2 "$dml" train --model lenet5 \
			--data fashion-mnist --epochs "${EPOCHS:-4}" --seed "$seed" --progress never $f 2>&1 | grep '^done:')
		printf 'seed %s  %-80s %s\n' "$seed" "$f" "$line"
	done
done
