#!/bin/bash
# Build ps-lite and pslite_bench.cc, and run one case of the comparison
# with `dml bench ps` (optional: ps-lite is not a dependency of dml).
#
#   bench/pslite/run.sh build                 # once: deps (apt), ps-lite, the bench
#   bench/pslite/run.sh dense  N  WORKERS [fused]
#   bench/pslite/run.sh sparse K N WORKERS [fused]
#
# Environment: PSLITE_SRC (ps-lite source tree, default /tmp/ps-lite; build
# clones https://github.com/dmlc/ps-lite there if absent), PSB_ITERS (200),
# PSB_WARMUP (10), PSB_BIN (/tmp/pslite_bench), PSB_PORT (8000).
# One server, on loopback (ZeroMQ over TCP), like the table in the README.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${PSLITE_SRC:-/tmp/ps-lite}
bin=${PSB_BIN:-/tmp/pslite_bench}

case "${1:-}" in
build)
	if ! dpkg -s libzmq3-dev protobuf-compiler libprotobuf-dev >/dev/null 2>&1; then
		apt-get install -y libzmq3-dev protobuf-compiler libprotobuf-dev
	fi
	[ -d "$src" ] || git clone --depth 1 https://github.com/dmlc/ps-lite "$src"
	make -C "$src" -j2 ps DEPS_PATH=/usr PROTOC=protoc
	g++ -std=c++14 -O3 -I"$src/src" -I"$src/include" -pthread -o "$bin" "$here/pslite_bench.cc" \
		"$src/build/libps.a" -lprotobuf-lite -lzmq
	echo "built $bin"
	exit 0
	;;
dense)
	export PSB_MODE=dense PSB_N=$2
	workers=$3 fused=${4:-}
	;;
sparse)
	export PSB_MODE=sparse PSB_K=$2 PSB_N=$3
	workers=$4 fused=${5:-}
	;;
*)
	sed -n '2,14p' "$0"
	exit 2
	;;
esac
[ "$fused" = fused ] && export PSB_FUSED=1 || export PSB_FUSED=0
export DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=$workers
export DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=${PSB_PORT:-8000}
pids=()
DMLC_ROLE=scheduler "$bin" & pids+=($!)
DMLC_ROLE=server "$bin" & pids+=($!)
for ((i = 0; i < workers; i++)); do
	DMLC_ROLE=worker "$bin" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
