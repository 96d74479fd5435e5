# mk/cuda.mk — the CUDA toolchain the project fetches itself, and the kernels.
#
# Included by the Makefile. Targets:
#   cuda-toolchain  fetch Debian bookworm's CUDA 11.8 (non-free) .debs with
#                   `apt-get download` and extract them with `dpkg-deb -x`
#                   into $(CUDA_HOME_LOCAL); nothing is installed, no driver
#                   package is pulled in, /etc/apt is not touched (apt runs on
#                   a private sources file and package lists under .cache).
#                   Idempotent: a no-op (no network) once the cache is complete.
#   kernels         compile kernels/cu/*.cu to PTX into kernels/ptx (committed,
#                   embedded by package kernels/ptx with go:embed), and
#                   assemble the PTX a compute capability 9.0 device loads into
#                   sm_90 cubins beside it (NAME.compute_XX.sm_90.cubin: no JIT
#                   at start-up on the H200).
#   kernels-check   recompile into a temporary folder and fail if the committed
#                   PTX or cubins differ (ptxas output is reproducible: same
#                   PTX, same bytes); then assemble every PTX with ptxas for the SASS
#                   targets and print registers, shared memory and spills per
#                   kernel (a spill is a finding; see kernels/cu/ABI.md).
#   kernels-emu     run every kernel on the host (kernels/cu/emu: one thread
#                   per CUDA thread) against CPU-backend references; needs only
#                   g++ >= 10, no CUDA toolchain and no GPU.
#   cuda-env        print the variables below as shell assignments.
#
# Exported for other targets (build-cuda, tests):
#   CUDA_HOME_LOCAL   the extracted toolchain (…/usr/include, …/usr/bin)
#   CUDA_INCLUDE      folder with cuda.h
#   CUDA_STUBS        folder with the libcuda.so stub (SONAME libcuda.so.1)
#   CUDA_CGO_ENV      CGO_CFLAGS/CGO_LDFLAGS assignments for `go build -tags cuda`
#   NVCC, PTXAS       the tools

# Included before the Makefile's first target, this file must not become the
# default goal: remember the goal so far and restore it at the end.
_cuda_mk_goal := $(.DEFAULT_GOAL)

CUDA_HOME_LOCAL ?= $(CURDIR)/.cache/cuda-11.8
CUDA_INCLUDE    := $(CUDA_HOME_LOCAL)/usr/include
CUDA_STUBS      := $(CUDA_HOME_LOCAL)/usr/lib/x86_64-linux-gnu/stubs
NVCC            := $(CUDA_HOME_LOCAL)/usr/lib/nvidia-cuda-toolkit/bin/nvcc
PTXAS           := $(CUDA_HOME_LOCAL)/usr/bin/ptxas
CUDA_CGO_ENV    := CGO_CFLAGS="-I$(CUDA_INCLUDE)" CGO_LDFLAGS="-L$(CUDA_STUBS)"
export CUDA_HOME_LOCAL CUDA_INCLUDE CUDA_STUBS NVCC PTXAS

# The .debs: the toolkit (nvcc, cicc, ptxas, libdevice) and the development
# package (cuda.h, cuda_runtime.h and the other headers nvcc includes, the
# libcuda.so stub). Of nvidia-cuda-dev only the headers and the stubs are
# extracted. Neither package's dependencies are fetched: nvcc -ptx needs none
# of the runtime libraries.
CUDA_DEBS      := nvidia-cuda-toolkit nvidia-cuda-dev
CUDA_APT_DIR   ?= $(CURDIR)/.cache/cuda-apt
CUDA_STAMP     := $(CUDA_HOME_LOCAL)/.complete
CUDA_APT_OPTS   = -o Dir::Etc::SourceList=$(CUDA_APT_DIR)/cuda.sources \
                  -o Dir::Etc::SourceParts=$(CUDA_APT_DIR)/none \
                  -o Dir::State::Lists=$(CUDA_APT_DIR)/lists \
                  -o Dir::Cache=$(CUDA_APT_DIR)/cache \
                  -o APT::Sandbox::User=$(shell id -un) \
                  -o Debug::NoLocking=true -qq
CUDA_APT_MIRROR ?= http://deb.debian.org/debian

# Host compiler for nvcc's preprocessing. CUDA 11.8 supports gcc <= 11;
# bookworm ships g++-12, which works with -allow-unsupported-compiler for
# device-only (-ptx) compilation. The PTX does not depend on it, but
# kernels-check compiles with the same one anyway.
CUDA_CCBIN ?= $(firstword $(shell command -v g++-12 g++-11 g++ 2>/dev/null))

.PHONY: cuda-toolchain cuda-env kernels kernels-check kernels-emu

cuda-toolchain: $(CUDA_STAMP)

$(CUDA_STAMP):
	@set -e; command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || \
	  { echo "cuda-toolchain: needs apt-get and dpkg-deb (Debian bookworm)"; exit 1; }; \
	start=$$(date +%s); \
	rm -rf $(CUDA_APT_DIR) $(CUDA_HOME_LOCAL).tmp; \
	mkdir -p $(CUDA_APT_DIR)/lists/partial $(CUDA_APT_DIR)/cache/archives/partial $(CUDA_APT_DIR)/none $(CUDA_APT_DIR)/debs $(CUDA_HOME_LOCAL).tmp; \
	printf '%s\n' 'Types: deb' 'URIs: $(CUDA_APT_MIRROR)' 'Suites: bookworm bookworm-updates' \
	  'Components: main contrib non-free' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' \
	  > $(CUDA_APT_DIR)/cuda.sources; \
	echo "cuda-toolchain: apt-get update (private lists, bookworm main contrib non-free)"; \
	apt-get $(CUDA_APT_OPTS) update; \
	echo "cuda-toolchain: apt-get download $(CUDA_DEBS)"; \
	cd $(CUDA_APT_DIR)/debs && apt-get $(CUDA_APT_OPTS) download $(CUDA_DEBS); cd $(CURDIR); \
	ls -l $(CUDA_APT_DIR)/debs; \
	for d in $(CUDA_APT_DIR)/debs/nvidia-cuda-toolkit_*.deb; do dpkg-deb -x $$d $(CUDA_HOME_LOCAL).tmp; done; \
	for d in $(CUDA_APT_DIR)/debs/nvidia-cuda-dev_*.deb; do \
	  dpkg-deb --fsys-tarfile $$d | tar -x -C $(CUDA_HOME_LOCAL).tmp ./usr/include ./usr/lib/x86_64-linux-gnu/stubs; done; \
	rm -f $(CUDA_HOME_LOCAL).tmp/usr/lib/nvidia-cuda-toolkit/bin/nvcc.profile; \
	cp mk/nvcc.profile $(CUDA_HOME_LOCAL).tmp/usr/lib/nvidia-cuda-toolkit/bin/nvcc.profile; \
	test -x $(CUDA_HOME_LOCAL).tmp/usr/lib/nvidia-cuda-toolkit/bin/nvcc; \
	test -x $(CUDA_HOME_LOCAL).tmp/usr/bin/ptxas; \
	test -f $(CUDA_HOME_LOCAL).tmp/usr/include/cuda.h; \
	test -f $(CUDA_HOME_LOCAL).tmp/usr/lib/x86_64-linux-gnu/stubs/libcuda.so; \
	(cd $(CUDA_APT_DIR)/debs && ls *.deb) > $(CUDA_HOME_LOCAL).tmp/.complete; \
	rm -rf $(CUDA_HOME_LOCAL) && mv $(CUDA_HOME_LOCAL).tmp $(CUDA_HOME_LOCAL); \
	rm -rf $(CUDA_APT_DIR); \
	echo "cuda-toolchain: $(CUDA_HOME_LOCAL) ready ($$(du -sh $(CUDA_HOME_LOCAL) | cut -f1), $$(( $$(date +%s) - start ))s)"; \
	$(NVCC) --version | tail -2

cuda-env:
	@echo CUDA_HOME_LOCAL=$(CUDA_HOME_LOCAL)
	@echo CUDA_INCLUDE=$(CUDA_INCLUDE)
	@echo CUDA_STUBS=$(CUDA_STUBS)
	@echo NVCC=$(NVCC)
	@echo PTXAS=$(PTXAS)
	@echo CGO_CFLAGS=-I$(CUDA_INCLUDE)
	@echo CGO_LDFLAGS=-L$(CUDA_STUBS)

# ---- kernels ----------------------------------------------------------------
#
# Every kernels/cu/NAME.cu becomes kernels/ptx/NAME.compute_70.ptx (JIT-compiled
# by any newer driver) and NAME.compute_90.ptx (Hopper), except the TF32
# tensor-core GEMM, which needs compute capability 8.0: gemm_tf32.cu becomes
# gemm_tf32.compute_80.ptx only (kernels/ptx picks the modules per device).
KERNEL_DIR    := kernels/cu
PTX_DIR       := kernels/ptx
KERNEL_SRCS   := $(wildcard $(KERNEL_DIR)/*.cu)
KERNEL_TF32   := $(KERNEL_DIR)/gemm_tf32.cu
KERNEL_FP32   := $(filter-out $(KERNEL_TF32),$(KERNEL_SRCS))
KERNEL_ARCHS  := 70 90
TF32_ARCHS    := 80
# -ptx: device code only. Default fmad (contraction on) is kept for the GEMMs;
# the kernels that must match the CPU bit for bit use __fmul_rn/__fadd_rn,
# which are never contracted, so they do not depend on this flag.
NVCC_FLAGS    := -ptx -O3 -std=c++14 -ccbin $(CUDA_CCBIN) -allow-unsupported-compiler \
                 --Werror all-warnings -Xptxas=-warn-spills
PTX_OUT       := $(foreach s,$(KERNEL_FP32),$(foreach a,$(KERNEL_ARCHS),$(PTX_DIR)/$(notdir $(s:.cu=)).compute_$(a).ptx)) \
                 $(foreach s,$(filter $(KERNEL_TF32),$(KERNEL_SRCS)),$(foreach a,$(TF32_ARCHS),$(PTX_DIR)/$(notdir $(s:.cu=)).compute_$(a).ptx))

# The machine code embedded beside the PTX: for each source, the PTX a device
# of compute capability 9.0 loads (ptx.ForDevice(9, 0): compute_90, for the
# TF32 GEMM compute_80) assembled for sm_90. Any other device JIT-compiles.
CUBIN_PTX     := $(foreach s,$(KERNEL_FP32),$(notdir $(s:.cu=)).compute_90) \
                 $(foreach s,$(filter $(KERNEL_TF32),$(KERNEL_SRCS)),$(notdir $(s:.cu=)).compute_80)
PTXAS_FLAGS   := -O3 -arch=sm_90

# kernels-ptx-into DIR: compile every source into DIR, and the cubins.
define kernels-ptx-into
	@set -e; mkdir -p $(1); \
	for s in $(KERNEL_FP32); do n=$$(basename $$s .cu); for a in $(KERNEL_ARCHS); do \
	  $(NVCC) $(NVCC_FLAGS) -arch=compute_$$a $$s -o $(1)/$$n.compute_$$a.ptx; done; done; \
	for s in $(filter $(KERNEL_TF32),$(KERNEL_SRCS)); do n=$$(basename $$s .cu); for a in $(TF32_ARCHS); do \
	  $(NVCC) $(NVCC_FLAGS) -arch=compute_$$a $$s -o $(1)/$$n.compute_$$a.ptx; done; done; \
	for p in $(CUBIN_PTX); do $(PTXAS) $(PTXAS_FLAGS) $(1)/$$p.ptx -o $(1)/$$p.sm_90.cubin; done
endef

kernels: $(CUDA_STAMP)
	$(call kernels-ptx-into,$(PTX_DIR))
	@ls -l $(PTX_OUT) $(foreach p,$(CUBIN_PTX),$(PTX_DIR)/$(p).sm_90.cubin)

# The SASS targets each PTX is assembled for: compute_70 PTX for sm_70 and
# sm_90 (what the driver's JIT does on Hopper), compute_90 for sm_90, the
# TF32 compute_80 PTX for sm_80 and sm_90.
kernels-check: $(CUDA_STAMP)
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	$(MAKE) --no-print-directory -f $(firstword $(MAKEFILE_LIST)) kernels-ptx-tmp KERNELS_TMP=$$tmp/ptx; \
	fail=0; \
	for f in $$tmp/ptx/*.ptx $$tmp/ptx/*.cubin; do n=$$(basename $$f); \
	  if [ ! -f $(PTX_DIR)/$$n ]; then echo "kernels-check: $(PTX_DIR)/$$n missing (run make kernels)"; fail=1; \
	  elif ! cmp -s $$f $(PTX_DIR)/$$n; then echo "kernels-check: $(PTX_DIR)/$$n differs from what $(KERNEL_DIR) compiles to (run make kernels)"; fail=1; fi; done; \
	for f in $(PTX_DIR)/*.ptx $(PTX_DIR)/*.cubin; do n=$$(basename $$f); \
	  [ -f $$tmp/ptx/$$n ] || { echo "kernels-check: $(PTX_DIR)/$$n has no source"; fail=1; }; done; \
	[ $$fail = 0 ] || exit 1; \
	echo "kernels-check: committed PTX and sm_90 cubins are what $(KERNEL_DIR) compiles to"; \
	printf '%-26s %-6s %-24s %s\n' module sass kernel "registers, shared memory, stack, spills"; \
	for f in $(PTX_DIR)/*.ptx; do \
	  case $$f in *compute_70*) sms="70 90";; *compute_80*) sms="80 90";; *) sms="90";; esac; \
	  for sm in $$sms; do \
	    $(PTXAS) -O3 -v -arch=sm_$$sm $$f -o $$tmp/out.cubin 2>$$tmp/log || { cat $$tmp/log; exit 1; }; \
	    awk -v f=$$(basename $$f .ptx) -v sm=sm_$$sm -f mk/ptxas-report.awk $$tmp/log; \
	  done; done | tee $$tmp/report; \
	n=$$(grep -c ' SPILL' $$tmp/report || true); \
	if [ "$$n" != 0 ]; then echo "kernels-check: $$n kernel builds spill registers (marked SPILL): a finding to explain"; \
	else echo "kernels-check: no kernel spills registers"; fi

kernels-ptx-tmp:
	$(call kernels-ptx-into,$(KERNELS_TMP))

# ---- host emulation ------------------------------------------------------------
EMU_CXX ?= $(firstword $(shell command -v g++-12 g++ 2>/dev/null))

kernels-emu:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	$(EMU_CXX) -std=c++20 -O1 -ffp-contract=off -pthread -Wall -Wno-unknown-pragmas \
	  -o $$tmp/emu_test $(KERNEL_DIR)/emu/emu_test.cc; \
	$$tmp/emu_test

.DEFAULT_GOAL := $(_cuda_mk_goal)
