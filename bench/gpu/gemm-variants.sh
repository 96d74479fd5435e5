#!/usr/bin/env bash
# gemm-variants.sh: SGEMM tuning variants of kernels/cu/gemm.cu timed against
# torch.matmul on the GPU in one device call.
#
#   here:        bash bench/gpu/gemm-variants.sh build    (needs make cuda-toolchain)
#   device tool: run  command: bash bench/gpu/gemm-variants.sh run   carry: [".gemmv"]
#
# build compiles gemm.cu once per variant (the DML_G128_* macros: shared-memory
# stages, K-step, blocks per SM, tile width) to an sm_90 cubin with the
# project's CUDA 11.8 ptxas, into .gemmv/v_NAME.cubin, and copies the committed
# compute_90 PTX and sm_90 cubins of the base modules for the start-up
# measurement. run times every variant (gemm-variants.py) and writes
# $OUT/gemm-variants.{json,log}.
set -euo pipefail
cd "$(dirname "$0")/../.."
D=.gemmv
case "${1:-}" in
build)
  eval "$(make --no-print-directory cuda-env | grep -E '^(NVCC|PTXAS)=')"
  CCBIN=$(command -v g++-12 || command -v g++-11 || command -v g++)
  rm -rf $D; mkdir -p $D
  v() {
    local name=$1; shift
    "$NVCC" -cubin -O3 -std=c++14 -ccbin "$CCBIN" -allow-unsupported-compiler -arch=sm_90 \
      -Xptxas=-v "$@" kernels/cu/gemm.cu -o $D/v_$name.cubin 2>$D/v_$name.log
    echo "$name: $(grep -A2 "'dml_sgemm_nn'" $D/v_$name.log | grep -oE 'Used [0-9]+ registers|[0-9]+ bytes spill stores' | tr '\n' ' '; grep -A3 "'dml_sgemm_nn'" $D/v_$name.log | grep -oE 'Used [0-9]+ registers' | tr '\n' ' ')"
  }
  v s2                                            # 53b2d77: two smem stages, BK 8
  v s1 -DDML_G128_STAGES=1                        # 695ac55's loop: one stage, two barriers
  v s2mb2 -DDML_G128_MINB=2                       # __launch_bounds__(256, 2)
  v s1mb2 -DDML_G128_STAGES=1 -DDML_G128_MINB=2
  v s2bk16 -DDML_G128_BK=16
  v s1bk16 -DDML_G128_BK=16 -DDML_G128_STAGES=1
  v s2bn64 -DDML_G128_BN=64 -DDML_G128_BK=16      # 128x64 tiles, 8x4 per thread
  v s1bn64 -DDML_G128_BN=64 -DDML_G128_BK=16 -DDML_G128_STAGES=1
  v s2bn64mb2 -DDML_G128_BN=64 -DDML_G128_BK=16 -DDML_G128_MINB=2
  v s1bn64mb2 -DDML_G128_BN=64 -DDML_G128_BK=16 -DDML_G128_MINB=2 -DDML_G128_STAGES=1
  W=-DDML_G128_WARP=true                          # warp tiles: 8x4 threads per warp
  v s2w $W
  v s1w $W -DDML_G128_STAGES=1
  v s2bk16w $W -DDML_G128_BK=16
  v s1bk16w $W -DDML_G128_BK=16 -DDML_G128_STAGES=1
  v s2bn64mb2w $W -DDML_G128_BN=64 -DDML_G128_BK=16 -DDML_G128_MINB=2
  v s1bn64mb2w $W -DDML_G128_BN=64 -DDML_G128_BK=16 -DDML_G128_MINB=2 -DDML_G128_STAGES=1
  for m in elementwise loss reduce gemm; do
    cp kernels/ptx/$m.compute_90.ptx $D/
    cp kernels/ptx/$m.compute_90.sm_90.cubin $D/$m.sm_90.cubin
  done
  cp bench/gpu/gemm-variants.py $D/
  # The cuda package's tests with this tree's loader (cubin on cc 9.0).
  eval "$(make --no-print-directory cuda-env | grep -E '^CGO_')"; export CGO_CFLAGS CGO_LDFLAGS
  go test -c -tags cuda -o $D/cuda.test ./cuda
  du -sh $D
  ;;
run)
  export PYTHONUNBUFFERED=1
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader || true
  # A fresh process's start-up through the Go loader: the cubins, then the
  # PTX JIT with the driver's cache off; each runs the conformance suite.
  if [ -x $D/cuda.test ]; then
    for mode in cubin jit; do
      e=""; [ $mode = jit ] && e="DML_CUDA_NO_CUBIN=1 CUDA_CACHE_DISABLE=1"
      s=$(date +%s%N)
      rc=0
      env $e timeout 150 $D/cuda.test -test.run '^TestConformance$' -test.count=1 -test.v > "$OUT/conformance-$mode.log" 2>&1 || rc=$?
      echo "go TestConformance ($mode): rc=$rc $(( ($(date +%s%N) - s) / 1000000 )) ms wall; $(grep -E -- '^(--- |ok|FAIL|PASS)' "$OUT/conformance-$mode.log" | tr '\n' ' ' | cut -c1-300)"
    done
  fi
  python3 $D/gemm-variants.py --dir $D --out "$OUT/gemm-variants.json" 2>&1 | tee "$OUT/gemm-variants.log"
  ;;
*) echo "usage: $0 build|run"; exit 2 ;;
esac
