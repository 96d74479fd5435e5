#!/usr/bin/env bash
# step-run.sh: issue 31's GPU step in one device-tool call, most important
# first, each section skipped once DEADLINE seconds (default 330) have
# passed: the GPU tests (conformance on every op, the optimizer rules and
# the sequence kernels included; the CNN and trainer checks), the CNN step
# at fp32/TF32/bf16 with the libraries (op by op and as a graph, cuDNN's
# fastest and its fp32-grade algorithms), Nsight Compute's per-kernel
# device times of three steps (BenchmarkCNNKernels), PyTorch's step in the
# same call, the GPT against PyTorch's (its step and kernel profile too),
# ResNet-50 at 224×224 against PyTorch's, LeNet-5 on Fashion-MNIST at each precision, two mpirun jobs, memcheck
# over the new kernels.
# Build here: `make gpu-bundle` (cuda.test, trainer.test and dml with -tags
# cuda in .gpu/bins.tgz; Fashion-MNIST in .gpu/fmnist) and
# bench/gpu/pack-mpi.sh (.gpukit/mpi.tgz), then
#
#   run  command: bash bench/gpu/step-run.sh   carry: [".gpu", ".gpukit/mpi.tgz"]
#
# SKIP="tests bench ncu torch gpt resnet50 lenet mpi memcheck" skips
# sections;
# BENCH_ENVS (space-separated, variables in one joined by commas) are the
# settings the CNN step is timed under, NCU_ENV and NCU_CASES the profile's.
# Writes $OUT/summary.txt (also printed) and $OUT/logs.tgz.
cd "$(dirname "$0")/../.."
[ -f .gpu/bins.tgz ] && tar xzf .gpu/bins.tgz -C .gpu
export PYTHONUNBUFFERED=1 DML_EXPECT_LIBS=1
O=$(mktemp -d); S=$OUT/summary.txt; : > "$S"; T0=$(date +%s)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
go_on() { # go_on SECTION: not skipped, and time is left
  [[ " ${SKIP:-} " == *" $1 "* ]] && return 1
  local e=$(( $(date +%s) - T0 ))
  if (( e > ${DEADLINE:-330} )); then echo "$1: skipped at ${e}s" >> "$S"; return 1; fi
}
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; } >> "$S" 2>&1
if go_on tests; then
  timeout 150 .gpu/cuda.test -test.v -test.count=1 -test.run 'Test' > "$O/cuda-tests.log" 2>&1
  echo "cuda.test (all tests) rc=$? $(( $(date +%s) - T0 ))s" >> "$S"
  grep -E -- "^--- (FAIL|SKIP)|^    --- FAIL|panic|cnn_test.go:|train_test.go:" "$O/cuda-tests.log" | cut -c1-260 | head -30 >> "$S"
  timeout 90 .gpu/trainer.test -test.v -test.count=1 -test.run 'CUDA' > "$O/trainer-tests.log" 2>&1
  echo "trainer.test -run CUDA rc=$? $(( $(date +%s) - T0 ))s" >> "$S"
  grep -E -- "--- FAIL|panic|cuda_test.go:" "$O/trainer-tests.log" | cut -c1-260 | head -12 >> "$S"
fi
if go_on bench; then
  for env in ${BENCH_ENVS:-DML_CUDNN_ALGO=fastest DML_CUDNN_ALGO=find}; do
    env ${env//,/ } timeout 100 .gpu/cuda.test -test.run x -test.bench 'CNNStep/.*/.*/lib' -test.benchtime 1x -test.v > "$O/bench-$env.log" 2>&1
    echo "bench $env rc=$? $(( $(date +%s) - T0 ))s" >> "$S"
    grep -E "bench_test.go" "$O/bench-$env.log" | sed "s/^ *//; s/cuda (gemm: cublas [0-9.]*, conv: cudnn [0-9.]*,\( batchnorm: cudnn [0-9.]*,\)* rest: dml)/libs/; s/^/$env /" >> "$S"
  done
  # Our own kernels alone (--kernels dml), once: no cuDNN setting applies.
  timeout 150 .gpu/cuda.test -test.run x -test.bench 'CNNStep/.*/.*/dml' -test.benchtime 1x -test.v > "$O/bench-dml.log" 2>&1
  echo "bench --kernels dml rc=$? $(( $(date +%s) - T0 ))s" >> "$S"
  grep -E "bench_test.go" "$O/bench-dml.log" | sed 's/^ *//' >> "$S"
fi
if go_on ncu; then
  for c in ${NCU_CASES:-lenet5/fp32 lenet5/bf16 resnet20/fp32 resnet20/bf16}; do
    go_on ncu || break
    f=$O/ncu-${c/\//-}.csv
    env ${NCU_ENV:-DML_CUDNN_ALGO=fastest} timeout 60 "$NCU" --clock-control none --profile-from-start off --csv --metrics gpu__time_duration.sum \
      .gpu/cuda.test -test.run x -test.bench "CNNKernels/$c\$" -test.benchtime 1x > "$f" 2> "$f.err"
    echo "ncu $c (${NCU_ENV:-DML_CUDNN_ALGO=fastest}) rc=$? $(( $(date +%s) - T0 ))s" >> "$S"
    python3 bench/gpu/ncu-sum.py 3 < "$f" >> "$S" 2>&1 || tail -n 3 "$f.err" >> "$S"
  done
fi
if go_on torch; then
  timeout 150 python3 bench/gpu/torch_cnn.py --out "$O/torch-cnn.json" > "$O/torch-cnn.log" 2>&1
  echo "torch_cnn rc=$? $(( $(date +%s) - T0 ))s" >> "$S"; grep "ms/step" "$O/torch-cnn.log" | sed 's/^/torch: /' >> "$S"
fi
if go_on gpt; then
  # The GPT step alone (BenchmarkGPTStep: ours, the libraries, graphs),
  # and where its time goes (BenchmarkGPTKernels under Nsight Compute).
  timeout 100 .gpu/cuda.test -test.run x -test.bench 'GPTStep' -test.benchtime 1x -test.v > "$O/bench-gpt.log" 2>&1
  echo "bench GPTStep rc=$? $(( $(date +%s) - T0 ))s" >> "$S"; grep -E "bench_test.go" "$O/bench-gpt.log" | sed 's/^ *//' >> "$S"
  timeout 90 "$NCU" --clock-control none --profile-from-start off --csv --metrics gpu__time_duration.sum \
    .gpu/cuda.test -test.run x -test.bench 'GPTKernels' -test.benchtime 1x > "$O/ncu-gpt.csv" 2> "$O/ncu-gpt.csv.err"
  echo "ncu gpt rc=$? $(( $(date +%s) - T0 ))s" >> "$S"
  python3 bench/gpu/ncu-sum.py 3 < "$O/ncu-gpt.csv" >> "$S" 2>&1 || tail -n 3 "$O/ncu-gpt.csv.err" >> "$S"
  TX=$(mktemp); find /usr/lib/python3* -name '*.py' 2>/dev/null | sort | head -2000 | xargs cat 2>/dev/null | head -c 4000000 > "$TX"
  G="--model gpt --data text --train $TX --batch 64 --seq-len 128 --epochs 1 --max-steps 100 --optimizer adamw --lr 1e-3 --eval-every 0 --progress never"
  for p in fp32 bf16; do
    timeout 90 .gpu/dml train --backend cuda $G --precision $p > "$O/gpt-$p.log" 2>&1
    echo "gpt cuda $p rc=$? $(( $(date +%s) - T0 ))s: $(grep -E '^(epoch|done)' "$O/gpt-$p.log" | tail -2 | tr '\n' ' ')" >> "$S"
    grep -E "^dml|rror|panic" "$O/gpt-$p.log" | head -3 >> "$S"
  done
  timeout 90 python3 bench/gpu/torch_gpt.py > "$O/torch-gpt.log" 2>&1
  echo "torch_gpt rc=$?" >> "$S"; grep -v RESULT "$O/torch-gpt.log" | sed 's/^/torch: /' | tail -4 >> "$S"
fi
if go_on resnet50; then
  # Issue 33's GPU ResNet-50 (3×224×224, batch 64), fp32 and bf16 as a
  # graph with the libraries, against PyTorch's in the same call.
  DML_BENCH_CNNS=resnet50 timeout 120 .gpu/cuda.test -test.run x -test.bench 'CNNStep/resnet50/(fp32|bf16)/lib\+graph' -test.benchtime 1x -test.v > "$O/bench-resnet50.log" 2>&1
  echo "bench resnet50 rc=$? $(( $(date +%s) - T0 ))s" >> "$S"; grep -E "bench_test.go" "$O/bench-resnet50.log" | sed 's/^ *//' >> "$S"
  timeout 120 python3 bench/gpu/torch_cnn.py --models resnet50 --out "$O/torch-resnet50.json" > "$O/torch-resnet50.log" 2>&1
  echo "torch_cnn resnet50 rc=$? $(( $(date +%s) - T0 ))s" >> "$S"; grep "ms/step" "$O/torch-resnet50.log" | sed 's/^/torch: /' >> "$S"
fi
if go_on lenet; then
  D="--data-dir .gpu/fmnist --progress never --model lenet5 --batch 64 --eval-every 0 --epochs 3"
  for p in fp32 bf16 fp16; do
    timeout 60 .gpu/dml train --backend cuda $D --precision $p > "$O/lenet-$p.log" 2>&1
    echo "lenet5 fashion-mnist 3 epochs --precision $p rc=$?: $(grep -o 'loss scale.*' "$O/lenet-$p.log" | tail -n 1) $(tail -n 1 "$O/lenet-$p.log")" >> "$S"
  done
  head -n 2 "$O/lenet-bf16.log" >> "$S"
fi
if go_on mpi; then
  ( source bench/gpu/env.sh >/dev/null 2>&1
    D="--data-dir .gpu/fmnist --progress never --model lenet5 --batch 64 --eval-every 0 --epochs 1"
    for o in "--optimizer lars --lr 0.5" "--optimizer adamw --lr 1e-3 --sync ps --servers 1"; do
      np=2; [[ $o == *ps* ]] && np=3
      timeout 60 mpirun -np $np .gpu/dml train --backend cuda $D $o > "$O/mpi.log" 2>&1
      echo "mpirun -np $np lenet5 $o rc=$?: $(tail -n 1 "$O/mpi.log")" >> "$S"
    done )
fi
if go_on memcheck; then
  CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  timeout 120 "$CS" --tool memcheck --error-exitcode 9 .gpu/cuda.test -test.run "^TestConformance(Own)?\$/(${MEMCHECK:-SGD|Momentum|Adagrad|Adam|LARS|Gelu|LayerNorm|Dropout|LRN|Embedding|Attention|MaxPoolPad|BatchNormReLU})\$" > "$O/memcheck.log" 2>&1
  echo "memcheck conformance (${MEMCHECK:-optimizers, sequence ops}) rc=$? ($(tail -n 1 "$O/memcheck.log"))" >> "$S"
fi
echo "total $(( $(date +%s) - T0 ))s" >> "$S"
tar czf "$OUT/logs.tgz" -C "$O" .
cat "$S"
