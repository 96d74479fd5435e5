#!/usr/bin/env bash
# precision-run.sh: --precision bf16 and fp16 (issue 31) in one device-tool
# call: the conformance suite at both precisions (with the libraries and on
# our kernels alone), the CNN step at bf16 beside fp32 and TF32 (op by op
# and as a CUDA graph, libraries under DML_CUDNN_ALGO=find and fastest),
# PyTorch's autocast row in the same call, and LeNet-5 on Fashion-MNIST for
# 3 epochs at fp32, bf16 and fp16 (the accuracy target: bf16 within 0.005
# of fp32). Build as for cuda-run.sh (.gpu/bins.tgz with cuda.test, dml,
# trainer.test; .gpu/fmnist), then:
#
#   run  command: bash bench/gpu/precision-run.sh   carry: [".gpu"]
#
# Writes $OUT/summary.txt (also printed) and $OUT/logs.tgz.
cd "$(dirname "$0")/../.."
[ -f .gpu/bins.tgz ] && tar xzf .gpu/bins.tgz -C .gpu
export PYTHONUNBUFFERED=1 DML_EXPECT_LIBS=1
O=$(mktemp -d); S=$OUT/summary.txt; : > "$S"
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; } >> "$S" 2>&1
timeout 150 .gpu/cuda.test -test.v -test.count=1 -test.run '^TestConformancePrecision$' > "$O/conformance.log" 2>&1
echo "TestConformancePrecision rc=$?" >> "$S"; grep -E -- "--- (FAIL|PASS): TestConformancePrecision/[a-z0-9/]*( |$)" "$O/conformance.log" | head -20 >> "$S"
grep -E -- "--- FAIL" "$O/conformance.log" | head -20 >> "$S"
for env in DML_CUDNN_ALGO=find DML_CUDNN_ALGO=fastest; do
  env $env timeout 200 .gpu/cuda.test -test.run x -test.bench 'CNNStep/.*/.*/lib' -test.benchtime 1x -test.v > "$O/bench-$env.log" 2>&1
  echo "bench $env rc=$?" >> "$S"
  grep -E "bench_test.go" "$O/bench-$env.log" | sed "s/^ *//; s/^/$env /" >> "$S"
done
timeout 200 python3 bench/gpu/torch_cnn.py --out "$O/torch-cnn.json" > "$O/torch-cnn.log" 2>&1
echo "torch_cnn rc=$?" >> "$S"; grep "ms/step" "$O/torch-cnn.log" | sed 's/^/torch: /' >> "$S"
D="--data-dir .gpu/fmnist --progress never --model lenet5 --batch 64 --eval-every 0 --epochs 3"
for p in fp32 bf16 fp16; do
  timeout 100 .gpu/dml train --backend cuda $D --precision $p > "$O/lenet-$p.log" 2>&1
  echo "lenet5 fashion-mnist 3 epochs --precision $p rc=$?: $(grep -o 'loss scale.*' "$O/lenet-$p.log" | tail -n 1) $(tail -n 1 "$O/lenet-$p.log")" >> "$S"
done
tar czf "$OUT/logs.tgz" -C "$O" .
cat "$S"
