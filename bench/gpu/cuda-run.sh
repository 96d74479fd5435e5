#!/usr/bin/env bash
# cuda-run.sh: every GPU check and measurement of the CUDA backend in one
# device-tool call. Build here first (`make gpu-bundle`: .gpu/bins.tgz with
# cuda.test, trainer.test and dml; .gpu/fmnist), then, with the device tool:
#
#   run  command: bash bench/gpu/cuda-run.sh   carry: [".gpu", ".gpukit/mpi.tgz"]
#
# Writes under $OUT: summary.txt (the short table, also printed last),
# tests.log, trainer-tests.log, bench.log, torch.log/.json, train.log,
# sanitizer.log. Optional in .gpu (bench/gpu/RESULTS.md, "staging" section,
# says how they are built): trainer.test (-tags cuda), dml-before (for
# before/after runs), and bins.tgz holding any of the binaries.
# Sections can be skipped: SKIP="tests bench torch cnn gpt train sanitizer".
# BENCH is the benchmarks' -test.bench pattern (default: all of them).
# DML_EXPECT_LIBS=1 (set here) makes TestLibraries fail unless cuBLAS and
# cuDNN both serve: the GPU machine has them.
cd "$(dirname "$0")/../.."
# Binaries may come packed (the 64 MiB a call carries): .gpu/bins.tgz.
[ -f .gpu/bins.tgz ] && tar xzf .gpu/bins.tgz -C .gpu
export PYTHONUNBUFFERED=1
export DML_EXPECT_LIBS=${DML_EXPECT_LIBS:-1}
S=$OUT/summary.txt; : > "$S"
skip() { [[ " ${SKIP:-} " == *" $1 "* ]]; }
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader; } >> "$S" 2>&1

if ! skip tests; then
  T=$OUT/tests.log; : > "$T"
  # One process per test: a fault in one cannot poison the context of the next.
  for t in $(.gpu/cuda.test -test.list 'Test.*'); do
    s=$(date +%s%N)
    timeout 180 .gpu/cuda.test -test.v -test.count=1 -test.run "^$t\$" >> "$T" 2>&1; rc=$?
    echo "$t rc=$rc $(( ($(date +%s%N) - s) / 1000000 ))ms" >> "$S"
    if [ $rc != 0 ] && [[ $t == TestConformance* ]]; then
      echo "=== $t again with DML_CUDA_SYNC=1 (each op waits: the failing op names itself)" >> "$T"
      DML_CUDA_SYNC=1 timeout 180 .gpu/cuda.test -test.v -test.count=1 -test.run "^$t\$" >> "$T" 2>&1
    fi
  done
  # The trainer's tests (built with the tag: its GPU test compares the
  # staged step with the plain path bit for bit), when the bundle has them.
  if [ -x .gpu/trainer.test ]; then
    s=$(date +%s%N)
    timeout 180 .gpu/trainer.test -test.v -test.count=1 > "$OUT/trainer-tests.log" 2>&1; rc=$?
    echo "trainer.test (all) rc=$rc $(( ($(date +%s%N) - s) / 1000000 ))ms" >> "$S"
    grep -E -- "--- (FAIL|SKIP)|^(ok|FAIL|PASS)|panic|cuda_test.go" "$OUT/trainer-tests.log" | head -20 >> "$S"
  fi
  grep -E -- "--- FAIL|panic|train_test.go|download_test.go" "$T" | head -40 >> "$S"
fi

if ! skip bench; then
  timeout 300 .gpu/cuda.test -test.run x -test.bench "${BENCH:-.}" -test.benchtime 1x -test.v > "$OUT/bench.log" 2>&1
  echo "bench rc=$?" >> "$S"
  # cuDNN's timed algorithm search instead of its heuristics, the CNN step only.
  DML_CUDNN_FIND=1 timeout 120 .gpu/cuda.test -test.run x -test.bench 'CNNStep/.*/.*/lib' -test.benchtime 1x -test.v > "$OUT/bench-find.log" 2>&1
  echo "bench (DML_CUDNN_FIND=1) rc=$?" >> "$S"
  grep -E "bench_test.go|SKIP|FAIL" "$OUT/bench.log" | sed 's/^ *//' >> "$S"
  grep -E "bench_test.go" "$OUT/bench-find.log" | sed 's/^ *//; s/^/find: /' >> "$S"
fi

if ! skip cnn; then
  timeout 240 python3 bench/gpu/torch_cnn.py --out "$OUT/torch-cnn.json" > "$OUT/torch-cnn.log" 2>&1
  echo "torch_cnn rc=$?" >> "$S"
  sed 's/^/torch: /' "$OUT/torch-cnn.log" >> "$S"
fi

if ! skip gpt; then
  # The GPT (issue 33) on any text the machine has (Python's own sources:
  # no Go there), dml's step on cuda (our sequence kernels, cuBLAS's GEMMs)
  # against PyTorch's eager and graph steps on the same GPU.
  TX=$(mktemp); find /usr/lib/python3* -name '*.py' 2>/dev/null | sort | head -2000 | xargs cat 2>/dev/null | head -c 4000000 > "$TX"
  G="--model gpt --data text --train $TX --batch 64 --seq-len 128 --epochs 1 --max-steps 100 --optimizer adamw --lr 1e-3 --eval-every 0 --progress never"
  for k in auto dml; do
    s=$(date +%s%N); timeout 200 .gpu/dml train --backend cuda $G --kernels $k > "$OUT/gpt-$k.log" 2>&1; rc=$?
    echo "gpt cuda --kernels $k rc=$rc $(( ($(date +%s%N) - s) / 1000000 ))ms: $(grep -E '^epoch' "$OUT/gpt-$k.log" | tail -1)" >> "$S"
    grep -E "^dml|rror" "$OUT/gpt-$k.log" | head -3 >> "$S"
  done
  timeout 200 python3 bench/gpu/torch_gpt.py > "$OUT/torch-gpt.log" 2>&1
  echo "torch_gpt rc=$?" >> "$S"; sed 's/^/torch: /' "$OUT/torch-gpt.log" | grep -v RESULT >> "$S"
fi

if ! skip torch; then
  timeout 240 python3 bench/gpu/torch_baselines.py --out "$OUT/torch.json" --reps 20 --step-reps 10 > "$OUT/torch.log" 2>&1
  echo "torch rc=$?" >> "$S"
fi

if ! skip train; then
  L=$OUT/train.log; W=$(mktemp -d); : > "$L"
  D="--data-dir .gpu/fmnist --progress never"
  run() {
    echo "\$ $*" | tee -a "$S" >> "$L"; s=$(date +%s%N)
    timeout 150 "$@" < /dev/null >> "$L" 2>&1; rc=$?
    echo "  rc=$rc $(( ($(date +%s%N) - s) / 1000000 ))ms" | tee -a "$S" >> "$L"
    tail -n 3 "$L" | grep -E "^(epoch|done|dml)" | sed 's/^/  /' >> "$S"
  }
  run .gpu/dml devices
  run .gpu/dml train --backend cpu $D --epochs 1 --max-steps 200 --save $W/cpu.npz
  run .gpu/dml train --backend cuda $D --epochs 1 --max-steps 200 --save $W/gpu.npz
  python3 bench/gpu/npzdiff.py $W/cpu.npz $W/gpu.npz >> "$S" 2>&1
  run .gpu/dml train --backend cuda $D --epochs 5 --metrics "$OUT/metrics.jsonl"
  run .gpu/dml train --backend cpu $D --epochs 1
  B="--hidden 1024,1024 --batch 1024 --epochs 10 --eval-every 0"
  run .gpu/dml train --backend cuda $D $B
  run .gpu/dml train --backend cuda --precision tf32 $D $B
  # The MPI bundle in a subshell: its libraries stay off PyTorch's path.
  ( if source bench/gpu/env.sh; then
    run mpirun -np 2 .gpu/dml devices
    run mpirun -np 2 .gpu/dml train --backend cuda $D --epochs 5
    run mpirun -np 2 .gpu/dml train --backend cuda $D --hidden 1024,1024 --batch 512 --epochs 10 --eval-every 0
    run mpirun -np 2 .gpu/dml train --backend cpu $D --epochs 1
  fi )
  # The CNN with the libraries (auto) and without (dml), LeNet-5 on
  # Fashion-MNIST, and every strategy under mpirun with the libraries.
  L5="--model lenet5 --batch 64 --eval-every 0"
  run .gpu/dml train --backend cuda $D $L5 --epochs 3 --save $W/l5-auto.npz
  run .gpu/dml train --backend cuda $D $L5 --epochs 3 --kernels dml --save $W/l5-dml.npz
  run .gpu/dml train --backend cuda $D $L5 --epochs 3 --precision tf32
  run .gpu/dml train --backend cuda $D $L5 --epochs 1 --kernels cudnn,cublas
  ( if source bench/gpu/env.sh; then
    for sy in allreduce dpsgd adpsgd; do
      run mpirun -np 2 .gpu/dml train --backend cuda $D $L5 --epochs 1 --sync $sy
    done
    run mpirun -np 3 .gpu/dml train --backend cuda $D $L5 --epochs 1 --sync ps --servers 1
  fi )
  # Before/after: .gpu/dml-before, when the bundle has it, is the same
  # tree with an earlier trainer (bench/gpu/RESULTS.md says which); the
  # same jobs, longer, back to back.
  if [ -x .gpu/dml-before ]; then
    B20="--hidden 1024,1024 --batch 1024 --epochs 20 --eval-every 0"
    for bin in .gpu/dml-before .gpu/dml; do
      run $bin train --backend cuda $D $B20
      run $bin train --backend cuda $D --epochs 5 --eval-every 0
    done
    ( if source bench/gpu/env.sh; then
      for bin in .gpu/dml-before .gpu/dml; do
        run mpirun -np 2 $bin train --backend cuda $D --hidden 1024,1024 --batch 512 --epochs 20 --eval-every 0
      done
    fi )
  fi
  grep -E "backend cuda|cuda:" "$L" | sort | uniq -c | sed 's/^/  start line: /' >> "$S"
  # Extra runs the caller names, e.g. EXTRA='env DML_TRY_PINNED=1 .gpu/dml train --backend cuda ...'
  if [ -n "${EXTRA:-}" ]; then while IFS= read -r c; do [ -n "$c" ] && eval "run $c"; done <<< "$EXTRA"; fi
fi

if ! skip sanitizer; then
  CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  if [ -n "$CS" ]; then
    timeout 240 "$CS" --tool memcheck --error-exitcode 9 .gpu/cuda.test -test.run '^TestConformance$/(Gemm|WholeConv|BatchNorm)$' > "$OUT/sanitizer.log" 2>&1
    echo "memcheck TestConformance (libraries: Gemm, WholeConv, BatchNorm) rc=$? ($(tail -n 1 "$OUT/sanitizer.log"))" >> "$S"
    if [ -x .gpu/trainer.test ]; then
      timeout 240 "$CS" --tool memcheck --error-exitcode 9 .gpu/trainer.test -test.run '^TestCUDAGraphSameBits$' > "$OUT/sanitizer-graph.log" 2>&1
      echo "memcheck TestCUDAGraphSameBits (graph-replayed steps) rc=$? ($(tail -n 1 "$OUT/sanitizer-graph.log"))" >> "$S"
    fi
  fi
fi
cat "$S"; echo ----; [ -f "$OUT/torch.log" ] && sed -n '/## SGEMM/,$p' "$OUT/torch.log"
