# mk/cuda-build.mk — dml built with the CUDA backend (build tag `cuda`).
#
# Included by the Makefile after mk/cuda.mk (which provides cuda-toolchain
# and CUDA_CGO_ENV). Targets:
#   build-cuda   bin/dml-cuda: dml with `--backend cuda` and `dml devices`.
#                Compiled against cuda.h from the fetched toolchain; the
#                binary does not link libcuda: it opens libcuda.so.1 (the
#                driver's) at run time, so it starts anywhere and says
#                "no CUDA device: …" where there is none.
#   test-cuda    the cuda package's tests (conformance suite, GPU-vs-CPU
#                training check); without a GPU they skip, saying why.
#   bench-cuda   the GPU benchmarks (SGEMM GFLOP/s, MLP training step).
#   gpu-bundle   what the GPU machine, which has no Go, needs in .gpu/: the
#                stripped cuda and trainer test binaries and dml, packed in
#                bins.tgz, and Fashion-MNIST. Carry .gpu
#                (and .gpukit, bench/gpu/pack-mpi.sh) with the device tool and
#                run bench/gpu/cuda-run.sh there (bench/gpu/RESULTS.md).

BIN_CUDA   ?= bin/dml-cuda
GPU_DIR    ?= .gpu
FMNIST_DIR ?= /usr/share/datasets/fashion-mnist

.PHONY: build-cuda test-cuda bench-cuda gpu-bundle

build-cuda: deps cuda-toolchain
	$(CUDA_CGO_ENV) $(GO) build -tags cuda -ldflags "-X main.version=$(VERSION)" -o $(BIN_CUDA) ./cmd/dml

test-cuda: deps cuda-toolchain
	$(CUDA_CGO_ENV) $(GO) vet -tags cuda ./cuda/ ./cmd/dml/
	set -o pipefail; { $(CUDA_CGO_ENV) $(GO) test -tags cuda -count=1 -json ./cuda/ && \
	  $(CUDA_CGO_ENV) $(GO) test -tags cuda -count=1 -json -run 'Devices' ./cmd/dml/; } | $(GO) run ./cmd/testreport

bench-cuda: deps cuda-toolchain
	$(CUDA_CGO_ENV) $(GO) test -tags cuda -run x -bench . -benchtime 1x ./cuda/

# The binaries travel packed (.gpu/bins.tgz, which bench/gpu/cuda-run.sh and
# libs-run.sh unpack there): with Fashion-MNIST they stay under the 64 MiB a
# device call carries.
gpu-bundle: deps cuda-toolchain
	rm -rf $(GPU_DIR)/raw && mkdir -p $(GPU_DIR)/raw $(GPU_DIR)/fmnist
	$(CUDA_CGO_ENV) $(GO) test -c -tags cuda -ldflags "-s -w" -o $(GPU_DIR)/raw/cuda.test ./cuda/
	$(CUDA_CGO_ENV) $(GO) test -c -tags cuda -ldflags "-s -w" -o $(GPU_DIR)/raw/trainer.test ./trainer/
	$(CUDA_CGO_ENV) $(GO) build -tags cuda -ldflags "-s -w -X main.version=$(VERSION)" -o $(GPU_DIR)/raw/dml ./cmd/dml
	tar czf $(GPU_DIR)/bins.tgz -C $(GPU_DIR)/raw cuda.test trainer.test dml && rm -rf $(GPU_DIR)/raw
	cp $(FMNIST_DIR)/*-ubyte.gz $(GPU_DIR)/fmnist/
