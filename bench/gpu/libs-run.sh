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
# ENVS (space-separated; within one, variables joined by commas) picks the
# settings the CNN step is timed under, PROFILE_ENV the profile's
# (SKIP_PROFILE=1: none), BN_MODES the cuDNN batch-norm modes checked.
# The 2026-11-27 call 5 ran: DML_CUDNN_DEBUG=1 BN_MODES=spatial
# SKIP_PROFILE=1 ENVS="DML_CUDNN_ALGO=find DML_CUDNN_ALGO=fastest".
# Writes $OUT/summary.txt (also printed) and $OUT/logs.tgz.
cd "$(dirname "$0")/../.."
[ -f .gpu/bins.tgz ] && tar xzf .gpu/bins.tgz -C .gpu
export PYTHONUNBUFFERED=1 DML_EXPECT_LIBS=1
O=$(mktemp -d); S=$OUT/summary.txt; : > "$S"
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; } >> "$S" 2>&1
for t in TestCNNMatchesCPU TestConformance TestConformanceOwn TestLibraries; do
  timeout 120 .gpu/cuda.test -test.v -test.count=1 -test.run "^$t\$" > "$O/$t.log" 2>&1
  echo "$t rc=$?" >> "$S"; grep -E -- "--- FAIL|cnn_test.go" "$O/$t.log" | cut -c1-300 >> "$S"
done
# Batch norm under each cuDNN setting (off: ours under --kernels auto).
for m in ${BN_MODES-persistent off}; do
  DML_CUDNN_BN=$m timeout 120 .gpu/cuda.test -test.v -test.count=1 -test.run '^(TestConformance/BatchNorm|TestCNNMatchesCPU)$' > "$O/bn-$m.log" 2>&1
  echo "DML_CUDNN_BN=$m TestConformance/BatchNorm, TestCNNMatchesCPU rc=$?" >> "$S"; grep -E -- "--- FAIL|cnn_test.go.*auto|resnet20 on" "$O/bn-$m.log" | cut -c1-300 >> "$S"
done
timeout 120 .gpu/trainer.test -test.v -test.count=1 -test.run 'TestCUDA' > "$O/trainer.log" 2>&1
echo "trainer.test -run TestCUDA rc=$?" >> "$S"; grep -E -- "--- FAIL|cuda_test.go" "$O/trainer.log" >> "$S"
for env in ${ENVS:-"DML_CUDNN_ALGO=find" "DML_CUDNN_ALGO=heuristic" "DML_CUDNN_ALGO=fastest" "DML_CUDNN_BN=persistent"}; do
  env ${env//,/ } timeout 150 .gpu/cuda.test -test.run x -test.bench 'CNNStep/.*/.*/lib' -test.benchtime 1x -test.v > "$O/bench-$env.log" 2>&1
  echo "bench $env rc=$?" >> "$S"
  grep -E "bench_test.go" "$O/bench-$env.log" | sed "s/^ *//; s/cuda (gemm: cublas [0-9.]*, conv: cudnn [0-9.]*, batchnorm: cudnn [0-9.]*, rest: dml)/libs/; s/^/$env /" >> "$S"
done
if [ -z "${SKIP_PROFILE:-}" ]; then
  env ${PROFILE_ENV:-DML_CUDNN_ALGO=find} timeout 120 .gpu/cuda.test -test.run x -test.bench 'CNNProfile/.*/lib' -test.benchtime 1x -test.v > "$O/profile.log" 2>&1
  echo "profile rc=$?" >> "$S"; grep -E "bench_test.go" "$O/profile.log" | sed 's/^ *//' | head -60 >> "$S"
fi
timeout 100 .gpu/cuda.test -test.run x -test.bench 'CNNStep/.*/fp32/dml$' -test.benchtime 1x -test.v > "$O/bench-dml.log" 2>&1
echo "bench --kernels dml rc=$?" >> "$S"; grep -E "bench_test.go" "$O/bench-dml.log" | sed 's/^ *//' >> "$S"
timeout 200 python3 bench/gpu/torch_cnn.py --out "$O/torch-cnn.json" > "$O/torch-cnn.log" 2>&1
echo "torch_cnn rc=$?" >> "$S"; grep "ms/step" "$O/torch-cnn.log" | sed 's/^/torch: /' >> "$S"
D="--data-dir .gpu/fmnist --progress never --model lenet5 --batch 64 --eval-every 0 --epochs 3"
for k in auto dml; do
  timeout 100 .gpu/dml train --backend cuda $D --kernels $k > "$O/lenet-$k.log" 2>&1
  echo "lenet5 fashion-mnist 3 epochs --kernels $k rc=$?: $(tail -n 1 "$O/lenet-$k.log")" >> "$S"
done
tar czf "$OUT/logs.tgz" -C "$O" .
cat "$S"
