#!/usr/bin/env bash
# libs-run.sh: the provider comparison of issue 31 in one device-tool call,
# after cuda-run.sh has run the whole set once. The CNN step (ResNet-20 at
# batch 128, LeNet-5 at batch 1024; fp32 and TF32; op by op and as a CUDA
# graph) with the libraries under each cuDNN setting, the per-op profile,
# PyTorch's step in the same call, and the GPU tests that the settings
# touch. Build as for cuda-run.sh (.gpu/bins.tgz with cuda.test, dml,
# trainer.test; .gpu/fmnist), then:
#
#   run  command: bash bench/gpu/libs-run.sh   carry: [".gpu"]
#
# Writes $OUT/summary.txt (also printed) and $OUT/logs.tgz.
cd "$(dirname "$0")/../.."
[ -f .gpu/bins.tgz ] && tar xzf .gpu/bins.tgz -C .gpu
export PYTHONUNBUFFERED=1 DML_EXPECT_LIBS=1
O=$(mktemp -d); S=$OUT/summary.txt; : > "$S"
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; } >> "$S" 2>&1
for t in TestCNNMatchesCPU TestConformance TestLibraries; do
  timeout 120 .gpu/cuda.test -test.v -test.count=1 -test.run "^$t\$" > "$O/$t.log" 2>&1
  echo "$t rc=$?" >> "$S"; grep -E -- "--- FAIL|cnn_test.go" "$O/$t.log" | cut -c1-300 >> "$S"
done
timeout 120 .gpu/trainer.test -test.v -test.count=1 -test.run 'TestCUDA' > "$O/trainer.log" 2>&1
echo "trainer.test -run TestCUDA rc=$?" >> "$S"; grep -E -- "--- FAIL|cuda_test.go" "$O/trainer.log" >> "$S"
for env in "DML_CUDNN_ALGO=find" "DML_CUDNN_ALGO=heuristic" "DML_CUDNN_ALGO=fastest" "DML_CUDNN_BN=persistent"; do
  env $env timeout 150 .gpu/cuda.test -test.run x -test.bench 'CNNStep/.*/.*/lib' -test.benchtime 1x -test.v > "$O/bench-$env.log" 2>&1
  echo "bench $env rc=$?" >> "$S"
  grep -E "bench_test.go" "$O/bench-$env.log" | sed "s/^ *//; s/cuda (gemm: cublas [0-9.]*, conv: cudnn [0-9.]*, batchnorm: cudnn [0-9.]*, rest: dml)/libs/; s/^/$env /" >> "$S"
done
timeout 120 .gpu/cuda.test -test.run x -test.bench 'CNNProfile/.*/lib' -test.benchtime 1x -test.v > "$O/profile.log" 2>&1
echo "profile rc=$?" >> "$S"; grep -E "bench_test.go" "$O/profile.log" | sed 's/^ *//' | head -60 >> "$S"
timeout 200 python3 bench/gpu/torch_cnn.py --out "$O/torch-cnn.json" > "$O/torch-cnn.log" 2>&1
echo "torch_cnn rc=$?" >> "$S"; grep "ms/step" "$O/torch-cnn.log" | sed 's/^/torch: /' >> "$S"
D="--data-dir .gpu/fmnist --progress never --model lenet5 --batch 64 --eval-every 0 --epochs 3"
for k in auto dml; do
  timeout 100 .gpu/dml train --backend cuda $D --kernels $k > "$O/lenet-$k.log" 2>&1
  echo "lenet5 fashion-mnist 3 epochs --kernels $k rc=$?: $(tail -n 1 "$O/lenet-$k.log")" >> "$S"
done
tar czf "$OUT/logs.tgz" -C "$O" .
cat "$S"
