#!/usr/bin/env bash
# probe.sh: the first call on the GPU machine, in one command: what the
# machine has (GPU, driver, glibc, compilers, any MPI of its own), our cgo
# binaries under the carried OpenMPI bundle (bench/gpu/env.sh), and the
# PyTorch baselines (bench/gpu/torch_baselines.py). Everything goes to $OUT.
#
#   device run, carry [.gpukit/mpi.tgz, .gpukit/bin]:
#     bash bench/gpu/probe.sh
#
# .gpukit/bin holds mpi.test (go test -c ./collectives/mpi) and dml-cpu (a
# CPU build of cmd/dml); .gpukit/mpi.tgz comes from bench/gpu/pack-mpi.sh.
OUT=${OUT:-/tmp/probe-out}
BIN=${BIN:-.gpukit/bin}
mkdir -p "$OUT"

section() { printf '\n=== %s\n' "$*"; }

probe() {
	section machine
	date -u; uname -a; head -2 /etc/os-release; nproc; free -g | head -2
	section nvidia-smi
	nvidia-smi
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,compute_cap --format=csv
	section glibc
	ldd --version | head -1
	section driver libraries
	ldconfig -p | grep -E 'libcuda\.so|libnvidia-ml' || echo "(no libcuda in ldconfig's cache)"
	ls -l /usr/local/nvidia/lib64/libcuda.so* 2>&1 | head -3
	ls -d /usr/local/nvidia/lib* /usr/local/cuda* 2>&1
	section tools
	for t in nvcc gcc g++ cc python3 tar gzip xz ssh ptxas; do printf '%-8s %s\n' "$t" "$(command -v $t)"; done
	nvcc --version | tail -2; gcc --version | head -1
	section "MPI of the machine itself"
	command -v mpirun mpiexec orterun
	ls /usr/lib/x86_64-linux-gnu | grep -i -E 'mpi|pmix' || echo "(no MPI libraries in /usr/lib/x86_64-linux-gnu)"
	timeout 30 python3 -c "import mpi4py; print('mpi4py', mpi4py.__version__, mpi4py.get_config())"
	timeout 30 python3 -c "from mpi4py import MPI; print(MPI.Get_library_version().strip())"
	section /dev/shm
	df -h /dev/shm
	section "ldd mpi.test, no bundle"
	ldd "$BIN/mpi.test"

	source bench/gpu/env.sh || return 1
	section "ldd mpi.test, bundle"
	ldd "$BIN/mpi.test"
	command -v mpirun; mpirun --version | head -1
	section "mpirun -np 2 mpi.test -test.run TestConformance"
	timeout -k 5 120 mpirun -np 2 "$BIN/mpi.test" -test.run TestConformance -test.v
	rc=$?
	echo "rc=$rc"
	if [ $rc != 0 ]; then
		section "again, verbose"
		timeout -k 5 60 mpirun -np 2 --mca plm_base_verbose 10 --mca ess_base_verbose 10 --mca pmix_base_verbose 10 \
			--mca btl_base_verbose 30 --mca mca_base_component_show_load_errors 1 "$BIN/mpi.test" -test.run TestConformance -test.v
		echo "rc=$?"
	fi
	section "mpi.test, whole (relaunches itself: -np 2, -np 4, then singleton)"
	timeout -k 5 180 "$BIN/mpi.test"
	echo "rc=$?"
	section "mpirun -np 2 dml-cpu train --data synthetic"
	timeout -k 5 60 mpirun -np 2 "$BIN/dml-cpu" train --data synthetic --model mlp --hidden 64 --epochs 1
	echo "rc=$?"
}
probe 2>&1 | tee "$OUT/probe.log"

section "PyTorch baselines" | tee -a "$OUT/probe.log"
PYTHONUNBUFFERED=1 timeout -k 5 ${TORCH_TIMEOUT:-300} python3 bench/gpu/torch_baselines.py --compile --out "$OUT/torch.json" 2>&1 | tee "$OUT/torch.log"
echo "rc=${PIPESTATUS[0]}" | tee -a "$OUT/torch.log"
