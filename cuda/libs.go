//go:build cuda

package cuda

// cuBLAS and cuDNN, loaded at run time with dlopen like the driver
// (driver.go): the binary neither links nor needs them. Where they load
// they serve Gemm (cuBLAS), the convolutions (kernels.WholeConvOps) and
// batch norm (cuDNN); our own kernels stay the fallback and the
// reference (--kernels dml).
//
// No vendor header is needed: the few types, constants and entry points
// used are declared below from NVIDIA's public API references (cuBLAS
// 11–13, cuDNN 8–9; only the "legacy" cuDNN API, present in both).
// Handles are void*, enums int; cudaStream_t is the driver's CUstream.
//
// Where they are looked for (findLibs): the sonames through the dynamic
// loader's own search (LD_LIBRARY_PATH, the ld.so cache), then each
// folder of DML_CUDA_LIBS (colon-separated), $CUDA_HOME/lib64,
// $CUDA_PATH/lib64, /usr/local/cuda/lib64 and
// /usr/local/cuda/targets/x86_64-linux/lib.

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>

extern CUresult dml_bind(CUcontext ctx);

typedef void *dml_handle;

// dml_lib_open dlopens path; on failure it writes dlerror() into msg.
static void *dml_lib_open(const char *path, char *msg, int n) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) snprintf(msg, n, "%s", dlerror());
	return h;
}

// dml_lib_path writes the file a handle was loaded from (the symbol
// resolves in it) into out.
static void dml_lib_path(void *h, const char *sym, char *out, int n) {
	Dl_info info;
	void *p = dlsym(h, sym);
	out[0] = 0;
	if (p && dladdr(p, &info) && info.dli_fname) snprintf(out, n, "%s", info.dli_fname);
}

static void dml_lib_close(void *h) { if (h) dlclose(h); }

#define SYM(h, var, name) do { \
		*(void**)(&var) = dlsym(h, name); \
		if (!var) { snprintf(msg, n, "it has no %s", name); return -1; } \
	} while (0)

// ---- cuBLAS ----
static int (*p_cublasCreate)(dml_handle*);
static int (*p_cublasDestroy)(dml_handle);
static int (*p_cublasSetStream)(dml_handle, CUstream);
static int (*p_cublasSetMathMode)(dml_handle, int);
static int (*p_cublasSetWorkspace)(dml_handle, void*, size_t);
static int (*p_cublasGetProperty)(int, int*);
static int (*p_cublasSgemm)(dml_handle, int, int, int, int, int, const float*, const float*, int,
	const float*, int, const float*, float*, int);
static const char *(*p_cublasGetStatusString)(int);
static int (*p_cublasSgemmStridedBatched)(dml_handle, int, int, int, int, int, const float*, const float*, int,
	long long, const float*, int, long long, const float*, float*, int, long long, int);

static int dml_cublas_syms(void *h, char *msg, int n) {
	SYM(h, p_cublasCreate, "cublasCreate_v2");
	SYM(h, p_cublasDestroy, "cublasDestroy_v2");
	SYM(h, p_cublasSetStream, "cublasSetStream_v2");
	SYM(h, p_cublasSetMathMode, "cublasSetMathMode");
	SYM(h, p_cublasSetWorkspace, "cublasSetWorkspace_v2");
	SYM(h, p_cublasGetProperty, "cublasGetProperty");
	SYM(h, p_cublasSgemm, "cublasSgemm_v2");
	*(void**)(&p_cublasGetStatusString) = dlsym(h, "cublasGetStatusString"); // optional
	*(void**)(&p_cublasSgemmStridedBatched) = dlsym(h, "cublasSgemmStridedBatched"); // optional: attention's products
	return 0;
}

// dml_cublas_version returns major*1000+minor*10+patch... as the library
// reports its properties (MAJOR_VERSION 0, MINOR_VERSION 1, PATCH_LEVEL 2).
static int dml_cublas_version(int *major, int *minor, int *patch) {
	int r;
	if ((r = p_cublasGetProperty(0, major)) != 0) return r;
	if ((r = p_cublasGetProperty(1, minor)) != 0) return r;
	return p_cublasGetProperty(2, patch);
}

static const char *dml_cublas_status(int s) {
	const char *str = p_cublasGetStatusString ? p_cublasGetStatusString(s) : 0;
	return str ? str : "";
}

static CUresult dml_cublas_create(CUcontext c, dml_handle *h, CUstream s, int math, CUdeviceptr ws, size_t wsBytes, int *st) {
	CUresult r = dml_bind(c);
	if (r != CUDA_SUCCESS) return r;
	if ((*st = p_cublasCreate(h)) != 0) return CUDA_SUCCESS;
	if ((*st = p_cublasSetStream(*h, s)) != 0) return CUDA_SUCCESS;
	if ((*st = p_cublasSetMathMode(*h, math)) != 0) return CUDA_SUCCESS;
	*st = p_cublasSetWorkspace(*h, (void*)ws, wsBytes);
	return CUDA_SUCCESS;
}

static int dml_cublas_destroy(CUcontext c, dml_handle h) {
	if (dml_bind(c) != CUDA_SUCCESS) return -1;
	return p_cublasDestroy(h);
}

static int dml_cublas_sgemm(CUcontext c, dml_handle h, int ta, int tb, int m, int n, int k, float alpha,
		CUdeviceptr a, int lda, CUdeviceptr b, int ldb, float beta, CUdeviceptr cc, int ldc) {
	if (dml_bind(c) != CUDA_SUCCESS) return -1;
	return p_cublasSgemm(h, ta, tb, m, n, k, &alpha, (const float*)a, lda, (const float*)b, ldb, &beta, (float*)cc, ldc);
}

static int dml_has_batched(void) { return p_cublasSgemmStridedBatched != 0; }

static int dml_cublas_sgemm_batched(CUcontext c, dml_handle h, int ta, int tb, int m, int n, int k, float alpha,
		CUdeviceptr a, int lda, long long sa, CUdeviceptr b, int ldb, long long sb, float beta, CUdeviceptr cc, int ldc,
		long long sc, int count) {
	if (dml_bind(c) != CUDA_SUCCESS) return -1;
	return p_cublasSgemmStridedBatched(h, ta, tb, m, n, k, &alpha, (const float*)a, lda, sa, (const float*)b, ldb, sb,
		&beta, (float*)cc, ldc, sc, count);
}

// ---- cuDNN (legacy API) ----
typedef struct {
	int algo;
	int status;
	float time;
	size_t memory;
	int determinism;
	int mathType;
	int reserved[3];
} dml_algo_perf;

static size_t (*p_cudnnGetVersion)(void);
static const char *(*p_cudnnGetErrorString)(int);
static int (*p_cudnnCreate)(dml_handle*);
static int (*p_cudnnDestroy)(dml_handle);
static int (*p_cudnnSetStream)(dml_handle, CUstream);
static int (*p_cudnnCreateTensorDescriptor)(dml_handle*);
static int (*p_cudnnSetTensor4dDescriptor)(dml_handle, int, int, int, int, int, int);
static int (*p_cudnnDestroyTensorDescriptor)(dml_handle);
static int (*p_cudnnCreateFilterDescriptor)(dml_handle*);
static int (*p_cudnnSetFilter4dDescriptor)(dml_handle, int, int, int, int, int, int);
static int (*p_cudnnDestroyFilterDescriptor)(dml_handle);
static int (*p_cudnnCreateConvolutionDescriptor)(dml_handle*);
static int (*p_cudnnSetConvolution2dDescriptor)(dml_handle, int, int, int, int, int, int, int, int);
static int (*p_cudnnSetConvolutionMathType)(dml_handle, int);
static int (*p_cudnnDestroyConvolutionDescriptor)(dml_handle);
static int (*p_cudnnGetFwdAlgo)(dml_handle, dml_handle, dml_handle, dml_handle, dml_handle, int, int*, dml_algo_perf*);
static int (*p_cudnnGetBwdDataAlgo)(dml_handle, dml_handle, dml_handle, dml_handle, dml_handle, int, int*, dml_algo_perf*);
static int (*p_cudnnGetBwdFilterAlgo)(dml_handle, dml_handle, dml_handle, dml_handle, dml_handle, int, int*, dml_algo_perf*);
static int (*p_cudnnFindFwdAlgoEx)(dml_handle, dml_handle, const void*, dml_handle, const void*, dml_handle, dml_handle, void*,
	int, int*, dml_algo_perf*, void*, size_t);
static int (*p_cudnnFindBwdDataAlgoEx)(dml_handle, dml_handle, const void*, dml_handle, const void*, dml_handle, dml_handle, void*,
	int, int*, dml_algo_perf*, void*, size_t);
static int (*p_cudnnFindBwdFilterAlgoEx)(dml_handle, dml_handle, const void*, dml_handle, const void*, dml_handle, dml_handle, void*,
	int, int*, dml_algo_perf*, void*, size_t);
static int (*p_cudnnConvolutionForward)(dml_handle, const void*, dml_handle, const void*, dml_handle, const void*, dml_handle, int,
	void*, size_t, const void*, dml_handle, void*);
static int (*p_cudnnConvolutionBackwardData)(dml_handle, const void*, dml_handle, const void*, dml_handle, const void*, dml_handle, int,
	void*, size_t, const void*, dml_handle, void*);
static int (*p_cudnnConvolutionBackwardFilter)(dml_handle, const void*, dml_handle, const void*, dml_handle, const void*, dml_handle, int,
	void*, size_t, const void*, dml_handle, void*);
static int (*p_cudnnAddTensor)(dml_handle, const void*, dml_handle, const void*, const void*, dml_handle, void*);
static int (*p_cudnnBNFwdTrain)(dml_handle, int, const void*, const void*, dml_handle, const void*, dml_handle, void*,
	dml_handle, const void*, const void*, double, void*, void*, double, void*, void*);
static int (*p_cudnnBNFwdInfer)(dml_handle, int, const void*, const void*, dml_handle, const void*, dml_handle, void*,
	dml_handle, const void*, const void*, const void*, const void*, double);
static int (*p_cudnnBNBwd)(dml_handle, int, const void*, const void*, const void*, const void*, dml_handle, const void*,
	dml_handle, const void*, dml_handle, void*, dml_handle, const void*, void*, void*, double, const void*, const void*);

static int dml_cudnn_syms(void *h, char *msg, int n) {
	SYM(h, p_cudnnGetVersion, "cudnnGetVersion");
	SYM(h, p_cudnnGetErrorString, "cudnnGetErrorString");
	SYM(h, p_cudnnCreate, "cudnnCreate");
	SYM(h, p_cudnnDestroy, "cudnnDestroy");
	SYM(h, p_cudnnSetStream, "cudnnSetStream");
	SYM(h, p_cudnnCreateTensorDescriptor, "cudnnCreateTensorDescriptor");
	SYM(h, p_cudnnSetTensor4dDescriptor, "cudnnSetTensor4dDescriptor");
	SYM(h, p_cudnnDestroyTensorDescriptor, "cudnnDestroyTensorDescriptor");
	SYM(h, p_cudnnCreateFilterDescriptor, "cudnnCreateFilterDescriptor");
	SYM(h, p_cudnnSetFilter4dDescriptor, "cudnnSetFilter4dDescriptor");
	SYM(h, p_cudnnDestroyFilterDescriptor, "cudnnDestroyFilterDescriptor");
	SYM(h, p_cudnnCreateConvolutionDescriptor, "cudnnCreateConvolutionDescriptor");
	SYM(h, p_cudnnSetConvolution2dDescriptor, "cudnnSetConvolution2dDescriptor");
	SYM(h, p_cudnnSetConvolutionMathType, "cudnnSetConvolutionMathType");
	SYM(h, p_cudnnDestroyConvolutionDescriptor, "cudnnDestroyConvolutionDescriptor");
	SYM(h, p_cudnnGetFwdAlgo, "cudnnGetConvolutionForwardAlgorithm_v7");
	SYM(h, p_cudnnGetBwdDataAlgo, "cudnnGetConvolutionBackwardDataAlgorithm_v7");
	SYM(h, p_cudnnGetBwdFilterAlgo, "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
	SYM(h, p_cudnnFindFwdAlgoEx, "cudnnFindConvolutionForwardAlgorithmEx");
	SYM(h, p_cudnnFindBwdDataAlgoEx, "cudnnFindConvolutionBackwardDataAlgorithmEx");
	SYM(h, p_cudnnFindBwdFilterAlgoEx, "cudnnFindConvolutionBackwardFilterAlgorithmEx");
	SYM(h, p_cudnnConvolutionForward, "cudnnConvolutionForward");
	SYM(h, p_cudnnConvolutionBackwardData, "cudnnConvolutionBackwardData");
	SYM(h, p_cudnnConvolutionBackwardFilter, "cudnnConvolutionBackwardFilter");
	SYM(h, p_cudnnAddTensor, "cudnnAddTensor");
	SYM(h, p_cudnnBNFwdTrain, "cudnnBatchNormalizationForwardTraining");
	SYM(h, p_cudnnBNFwdInfer, "cudnnBatchNormalizationForwardInference");
	SYM(h, p_cudnnBNBwd, "cudnnBatchNormalizationBackward");
	return 0;
}

static size_t dml_cudnn_version(void) { return p_cudnnGetVersion(); }
static const char *dml_cudnn_status(int s) {
	const char *str = p_cudnnGetErrorString(s);
	return str ? str : "";
}

static CUresult dml_cudnn_create(CUcontext c, dml_handle *h, CUstream s, int *st) {
	CUresult r = dml_bind(c);
	if (r != CUDA_SUCCESS) return r;
	if ((*st = p_cudnnCreate(h)) != 0) return CUDA_SUCCESS;
	*st = p_cudnnSetStream(*h, s);
	return CUDA_SUCCESS;
}

static int dml_cudnn_destroy(CUcontext c, dml_handle h) {
	if (dml_bind(c) != CUDA_SUCCESS) return -1;
	return p_cudnnDestroy(h);
}

// A convolution's descriptors: x n×c×h×w, w o×c×k×k, y n×o×oh×ow, the
// bias 1×o×1×1, float32 NCHW, cross-correlation with zero padding.
typedef struct {
	dml_handle x, y, w, conv, bias;
} dml_conv_desc;

static int dml_cudnn_conv_desc(dml_conv_desc *d, int n, int c, int h, int w, int o, int k, int stride, int pad,
		int oh, int ow, int math) {
	int st;
	if ((st = p_cudnnCreateTensorDescriptor(&d->x)) != 0) return st;
	if ((st = p_cudnnCreateTensorDescriptor(&d->y)) != 0) return st;
	if ((st = p_cudnnCreateTensorDescriptor(&d->bias)) != 0) return st;
	if ((st = p_cudnnCreateFilterDescriptor(&d->w)) != 0) return st;
	if ((st = p_cudnnCreateConvolutionDescriptor(&d->conv)) != 0) return st;
	// CUDNN_TENSOR_NCHW 0, CUDNN_DATA_FLOAT 0.
	if ((st = p_cudnnSetTensor4dDescriptor(d->x, 0, 0, n, c, h, w)) != 0) return st;
	if ((st = p_cudnnSetTensor4dDescriptor(d->y, 0, 0, n, o, oh, ow)) != 0) return st;
	if ((st = p_cudnnSetTensor4dDescriptor(d->bias, 0, 0, 1, o, 1, 1)) != 0) return st;
	if ((st = p_cudnnSetFilter4dDescriptor(d->w, 0, 0, o, c, k, k)) != 0) return st;
	// CUDNN_CROSS_CORRELATION 1, compute in CUDNN_DATA_FLOAT.
	if ((st = p_cudnnSetConvolution2dDescriptor(d->conv, pad, pad, stride, stride, 1, 1, 1, 0)) != 0) return st;
	return p_cudnnSetConvolutionMathType(d->conv, math);
}

static void dml_cudnn_conv_desc_free(dml_conv_desc *d) {
	if (d->x) p_cudnnDestroyTensorDescriptor(d->x);
	if (d->y) p_cudnnDestroyTensorDescriptor(d->y);
	if (d->bias) p_cudnnDestroyTensorDescriptor(d->bias);
	if (d->w) p_cudnnDestroyFilterDescriptor(d->w);
	if (d->conv) p_cudnnDestroyConvolutionDescriptor(d->conv);
}

// dml_cudnn_algos asks cuDNN's heuristics (find == 0) or its timed search
// on the given buffers (find != 0) for the algorithms of one direction
// (0 forward, 1 data gradient, 2 filter gradient), best first, into perf.
static CUresult dml_cudnn_algos(CUcontext c, dml_handle h, dml_conv_desc *d, int dir, int find,
		CUdeviceptr x, CUdeviceptr w, CUdeviceptr y, CUdeviceptr ws, size_t wsBytes,
		dml_algo_perf *perf, int maxAlgos, int *got, int *st) {
	CUresult r = dml_bind(c);
	if (r != CUDA_SUCCESS) return r;
	switch (dir * 2 + (find != 0)) {
	case 0: *st = p_cudnnGetFwdAlgo(h, d->x, d->w, d->conv, d->y, maxAlgos, got, perf); break;
	case 1: *st = p_cudnnFindFwdAlgoEx(h, d->x, (void*)x, d->w, (void*)w, d->conv, d->y, (void*)y, maxAlgos, got, perf, (void*)ws, wsBytes); break;
	case 2: *st = p_cudnnGetBwdDataAlgo(h, d->w, d->y, d->conv, d->x, maxAlgos, got, perf); break;
	case 3: *st = p_cudnnFindBwdDataAlgoEx(h, d->w, (void*)w, d->y, (void*)y, d->conv, d->x, (void*)x, maxAlgos, got, perf, (void*)ws, wsBytes); break;
	case 4: *st = p_cudnnGetBwdFilterAlgo(h, d->x, d->y, d->conv, d->w, maxAlgos, got, perf); break;
	default: *st = p_cudnnFindBwdFilterAlgoEx(h, d->x, (void*)x, d->y, (void*)y, d->conv, d->w, (void*)w, maxAlgos, got, perf, (void*)ws, wsBytes); break;
	}
	return CUDA_SUCCESS;
}

// dml_cudnn_conv runs one direction: forward y = x⋆w (+ bias), data
// gradient x = dy⋆ᵀw, filter gradient w = x⋆dy (the bias gradient is
// ours: Backend.biasGrad); the buffers keep their forward names (x, w,
// y), one of them the output.
static int dml_cudnn_conv(CUcontext c, dml_handle h, dml_conv_desc *d, int dir, int algo,
		CUdeviceptr x, CUdeviceptr w, CUdeviceptr y, CUdeviceptr bias, CUdeviceptr ws, size_t wsBytes) {
	float one = 1, zero = 0;
	int st;
	if (dml_bind(c) != CUDA_SUCCESS) return -1;
	switch (dir) {
	case 0:
		st = p_cudnnConvolutionForward(h, &one, d->x, (void*)x, d->w, (void*)w, d->conv, algo, (void*)ws, wsBytes, &zero, d->y, (void*)y);
		if (st == 0 && bias) st = p_cudnnAddTensor(h, &one, d->bias, (void*)bias, &one, d->y, (void*)y);
		return st;
	case 1:
		return p_cudnnConvolutionBackwardData(h, &one, d->w, (void*)w, d->y, (void*)y, d->conv, algo, (void*)ws, wsBytes, &zero, d->x, (void*)x);
	default:
		return p_cudnnConvolutionBackwardFilter(h, &one, d->x, (void*)x, d->y, (void*)y, d->conv, algo, (void*)ws, wsBytes, &zero, d->w, (void*)w);
	}
}

// Batch norm: x (and y, dy, dx) n×c×hw as n×c×hw×1, the per-channel
// vectors 1×c×1×1; mode CUDNN_BATCHNORM_SPATIAL (1) or
// CUDNN_BATCHNORM_SPATIAL_PERSISTENT (2) for training and the gradient,
// SPATIAL for inference.
typedef struct { dml_handle x, ch; } dml_bn_desc;

static int dml_cudnn_bn_desc(dml_bn_desc *d, int n, int c, int hw) {
	int st;
	if ((st = p_cudnnCreateTensorDescriptor(&d->x)) != 0) return st;
	if ((st = p_cudnnCreateTensorDescriptor(&d->ch)) != 0) return st;
	if ((st = p_cudnnSetTensor4dDescriptor(d->x, 0, 0, n, c, hw, 1)) != 0) return st;
	return p_cudnnSetTensor4dDescriptor(d->ch, 0, 0, 1, c, 1, 1);
}

static void dml_cudnn_bn_desc_free(dml_bn_desc *d) {
	if (d->x) p_cudnnDestroyTensorDescriptor(d->x);
	if (d->ch) p_cudnnDestroyTensorDescriptor(d->ch);
}

static int dml_cudnn_bn_train(CUcontext c, dml_handle h, dml_bn_desc *d, int mode, CUdeviceptr x, CUdeviceptr y,
		CUdeviceptr gamma, CUdeviceptr beta, double momentum, CUdeviceptr rm, CUdeviceptr rv, double eps,
		CUdeviceptr mean, CUdeviceptr invstd) {
	float one = 1, zero = 0;
	if (dml_bind(c) != CUDA_SUCCESS) return -1;
	return p_cudnnBNFwdTrain(h, mode, &one, &zero, d->x, (void*)x, d->x, (void*)y, d->ch, (void*)gamma, (void*)beta,
		momentum, (void*)rm, (void*)rv, eps, (void*)mean, (void*)invstd);
}

static int dml_cudnn_bn_infer(CUcontext c, dml_handle h, dml_bn_desc *d, CUdeviceptr x, CUdeviceptr y,
		CUdeviceptr gamma, CUdeviceptr beta, CUdeviceptr rm, CUdeviceptr rv, double eps) {
	float one = 1, zero = 0;
	if (dml_bind(c) != CUDA_SUCCESS) return -1;
	return p_cudnnBNFwdInfer(h, 1, &one, &zero, d->x, (void*)x, d->x, (void*)y, d->ch, (void*)gamma, (void*)beta,
		(void*)rm, (void*)rv, eps);
}

static int dml_cudnn_bn_grad(CUcontext c, dml_handle h, dml_bn_desc *d, int mode, CUdeviceptr x, CUdeviceptr dy, CUdeviceptr dx,
		CUdeviceptr gamma, CUdeviceptr dgamma, CUdeviceptr dbeta, double eps, CUdeviceptr mean, CUdeviceptr invstd) {
	float one = 1, zero = 0;
	if (dml_bind(c) != CUDA_SUCCESS) return -1;
	return p_cudnnBNBwd(h, mode, &one, &zero, &one, &zero, d->x, (void*)x, d->x, (void*)dy, d->x, (void*)dx,
		d->ch, (void*)gamma, (void*)dgamma, (void*)dbeta, eps, (void*)mean, (void*)invstd);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"
)

// lib is one vendor library as it loaded (or did not).
type lib struct {
	name    string // "cublas", "cudnn"
	path    string // the file loaded
	version string // "13.1.0"
	err     error  // why it is not there; nil when loaded
}

// Provider is how the start line names it: "cublas 13.1".
func (l *lib) provider() string {
	v := l.version
	if i := strings.LastIndexByte(v, '.'); i > 0 && strings.Count(v, ".") == 2 {
		v = v[:i]
	}
	return l.name + " " + v
}

// The sonames tried, newest first. cuBLAS: CUDA 13, 12, 11. cuDNN: 9 and
// 8 (the legacy API used here is in both).
var (
	cublasSonames = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}
	cudnnSonames  = []string{"libcudnn.so.9", "libcudnn.so.8"}
	// minCUDNN is the oldest cuDNN taken: 8.0 (cudnnGetVersion's
	// major·1000+minor·100 in 8, major·10000+minor·100 in 9).
	minCUDNN = 8000
)

// libDirs are the folders tried besides the loader's own search: the
// user's (DML_CUDA_LIBS), tried before it, and the toolkit's, after.
func libDirs() (user, toolkit []string) {
	for _, d := range strings.Split(os.Getenv("DML_CUDA_LIBS"), ":") {
		if d != "" {
			user = append(user, d)
		}
	}
	for _, v := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if d := os.Getenv(v); d != "" {
			toolkit = append(toolkit, filepath.Join(d, "lib64"))
		}
	}
	return user, append(toolkit, "/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib")
}

// openLib dlopens the first of sonames found: DML_CUDA_LIBS's folders
// first (the user's word wins), then the loader's search, then the
// toolkit's usual folders. It returns the handle and the file, or why
// none loaded (every attempt's message, shortest form).
func openLib(sonames []string) (unsafe.Pointer, string, error) {
	var why []string
	try := func(p string) unsafe.Pointer {
		cp := C.CString(p)
		defer C.free(unsafe.Pointer(cp))
		var msg [512]C.char
		h := C.dml_lib_open(cp, &msg[0], C.int(len(msg)))
		if h == nil {
			m := C.GoString(&msg[0])
			if !strings.Contains(m, "No such file") {
				why = append(why, m) // found but broken: worth saying
			}
		}
		return h
	}
	user, toolkit := libDirs()
	for _, so := range sonames {
		cands := []string{}
		for _, d := range user {
			cands = append(cands, filepath.Join(d, so))
		}
		cands = append(cands, so)
		for _, d := range toolkit {
			cands = append(cands, filepath.Join(d, so))
		}
		for _, p := range cands {
			if h := try(p); h != nil {
				return h, p, nil
			}
		}
	}
	msg := fmt.Sprintf("none of %s found (searched the loader's path and %s; DML_CUDA_LIBS names more folders)",
		strings.Join(sonames, ", "), strings.Join(append(user, toolkit...), ", "))
	if len(why) > 0 {
		msg += "; " + strings.Join(why, "; ")
	}
	return nil, "", errors.New(msg)
}

// loadLib opens one library, resolves its symbols with syms and reads its
// version with version.
func loadLib(name string, sonames []string, sym string, syms func(h unsafe.Pointer, msg *C.char, n C.int) C.int,
	version func() (string, error)) *lib {
	l := &lib{name: name}
	h, p, err := openLib(sonames)
	if err != nil {
		l.err = err
		return l
	}
	var msg [512]C.char
	if syms(h, &msg[0], C.int(len(msg))) != 0 {
		l.err = fmt.Errorf("%s: %s (not a usable %s)", p, C.GoString(&msg[0]), name)
		C.dml_lib_close(h)
		return l
	}
	l.path = p
	csym := C.CString(sym)
	var where [1024]C.char
	C.dml_lib_path(h, csym, &where[0], C.int(len(where)))
	C.free(unsafe.Pointer(csym))
	if w := C.GoString(&where[0]); w != "" {
		l.path = w // the file the loader chose
	}
	if l.version, err = version(); err != nil {
		l.err = fmt.Errorf("%s: %w", p, err)
	}
	return l
}

var libs struct {
	once          sync.Once
	cublas, cudnn *lib
}

// loadLibs loads both libraries once per process (each independently:
// one may load where the other does not).
func loadLibs() (cublas, cudnn *lib) {
	libs.once.Do(func() {
		libs.cublas = loadCUBLAS(cublasSonames)
		libs.cudnn = loadCUDNN(cudnnSonames)
	})
	return libs.cublas, libs.cudnn
}

// loadCUBLAS opens the first of sonames as cuBLAS (the entry points are
// process-wide: tests call it only where no real library is in use).
func loadCUBLAS(sonames []string) *lib {
	return loadLib("cublas", sonames, "cublasCreate_v2", func(h unsafe.Pointer, msg *C.char, n C.int) C.int {
		return C.dml_cublas_syms(h, msg, n)
	}, func() (string, error) {
		var a, b, c C.int
		if st := C.dml_cublas_version(&a, &b, &c); st != 0 {
			return "", fmt.Errorf("cublasGetProperty: status %d", int(st))
		}
		return fmt.Sprintf("%d.%d.%d", a, b, c), nil
	})
}

// loadCUDNN opens the first of sonames as cuDNN (as loadCUBLAS).
func loadCUDNN(sonames []string) *lib {
	return loadLib("cudnn", sonames, "cudnnCreate", func(h unsafe.Pointer, msg *C.char, n C.int) C.int {
		return C.dml_cudnn_syms(h, msg, n)
	}, func() (string, error) {
		v := int(C.dml_cudnn_version())
		major, minor, patch := cudnnVersion(v)
		if v < minCUDNN {
			return "", fmt.Errorf("cuDNN %d.%d.%d is older than 8.0, the oldest dml uses", major, minor, patch)
		}
		return fmt.Sprintf("%d.%d.%d", major, minor, patch), nil
	})
}

// cudnnVersion splits cudnnGetVersion's number: major·1000 + minor·100 +
// patch up to 8.x, major·10000 + minor·100 + patch from 9.0 (90000).
func cudnnVersion(v int) (major, minor, patch int) {
	if v >= 90000 {
		return v / 10000, v % 10000 / 100, v % 100
	}
	return v / 1000, v % 1000 / 100, v % 100
}

// libErr is a library call that returned a status other than success.
type libErr struct {
	lib, call string
	status    int
}

func (e *libErr) Error() string {
	var s string
	switch e.lib {
	case "cublas":
		s = C.GoString(C.dml_cublas_status(C.int(e.status)))
	case "cudnn":
		s = C.GoString(C.dml_cudnn_status(C.int(e.status)))
	}
	if s == "" {
		s = "error"
	}
	return fmt.Sprintf("%s %s: %s (status %d)", e.lib, e.call, s, e.status)
}

func libCheck(lib, call string, st C.int) error {
	if st == 0 {
		return nil
	}
	return &libErr{lib: lib, call: call, status: int(st)}
}

// cuBLAS math modes: CUBLAS_DEFAULT_MATH (no TF32 for float32 products),
// CUBLAS_TF32_TENSOR_OP_MATH.
const (
	cublasDefaultMath = 0
	cublasTF32Math    = 3
)

// blasCreate makes a cuBLAS handle on q's stream, with this math mode and
// the workspace at ws (our memory: nothing of cuBLAS's own allocator).
func blasCreate(q queue, math int, ws devPtr, wsBytes int) (unsafe.Pointer, error) {
	var h C.dml_handle
	var st C.int
	if err := check("cuCtxSetCurrent", C.dml_cublas_create(q.ctx, &h, q.s, C.int(math), C.CUdeviceptr(ws), C.size_t(wsBytes), &st)); err != nil {
		return nil, err
	}
	if err := libCheck("cublas", "cublasCreate", st); err != nil {
		if h != nil {
			C.dml_cublas_destroy(q.ctx, h)
		}
		return nil, err
	}
	return unsafe.Pointer(h), nil
}

func blasDestroy(q queue, h unsafe.Pointer) {
	if h != nil {
		C.dml_cublas_destroy(q.ctx, C.dml_handle(h))
	}
}

// blasSgemm is cublasSgemm on column-major operands.
func blasSgemm(q queue, h unsafe.Pointer, ta, tb bool, m, n, k int, alpha float32, a devPtr, lda int, b devPtr, ldb int, beta float32, c devPtr, ldc int) error {
	return libCheck("cublas", "cublasSgemm", C.dml_cublas_sgemm(q.ctx, C.dml_handle(h), C.int(btoi(ta)), C.int(btoi(tb)),
		C.int(m), C.int(n), C.int(k), C.float(alpha), C.CUdeviceptr(a), C.int(lda), C.CUdeviceptr(b), C.int(ldb),
		C.float(beta), C.CUdeviceptr(c), C.int(ldc)))
}

// hasBatched reports whether the loaded cuBLAS has cublasSgemmStridedBatched.
func hasBatched() bool { return C.dml_has_batched() != 0 }

// blasSgemmBatched is count column-major products C_q = α·op(A_q)·op(B_q)
// + β·C_q, operand q starting q·stride floats after the first.
func blasSgemmBatched(q queue, h unsafe.Pointer, g stridedGemm) error {
	return libCheck("cublas", "cublasSgemmStridedBatched", C.dml_cublas_sgemm_batched(q.ctx, C.dml_handle(h),
		C.int(btoi(g.ta)), C.int(btoi(g.tb)), C.int(g.m), C.int(g.n), C.int(g.k), C.float(g.alpha),
		C.CUdeviceptr(g.a), C.int(g.lda), C.longlong(g.sa), C.CUdeviceptr(g.b), C.int(g.ldb), C.longlong(g.sb),
		C.float(g.beta), C.CUdeviceptr(g.c), C.int(g.ldc), C.longlong(g.sc), C.int(g.count)))
}

func dnnCreate(q queue) (unsafe.Pointer, error) {
	var h C.dml_handle
	var st C.int
	if err := check("cuCtxSetCurrent", C.dml_cudnn_create(q.ctx, &h, q.s, &st)); err != nil {
		return nil, err
	}
	if err := libCheck("cudnn", "cudnnCreate", st); err != nil {
		if h != nil {
			C.dml_cudnn_destroy(q.ctx, h)
		}
		return nil, err
	}
	return unsafe.Pointer(h), nil
}

func dnnDestroy(q queue, h unsafe.Pointer) {
	if h != nil {
		C.dml_cudnn_destroy(q.ctx, C.dml_handle(h))
	}
}

// cuDNN math types for the convolutions: CUDNN_DEFAULT_MATH lets float32
// convolutions use TF32 tensor cores; CUDNN_FMA_MATH keeps them float32.
const (
	cudnnDefaultMath = 0
	cudnnFMAMath     = 3
)

// convDesc is a convolution's cuDNN descriptors, in C memory.
type convDesc struct{ d *C.dml_conv_desc }

func newConvDesc(s convShape, math int) (convDesc, error) {
	d := (*C.dml_conv_desc)(C.calloc(1, C.size_t(unsafe.Sizeof(C.dml_conv_desc{}))))
	oh, ow := s.out()
	st := C.dml_cudnn_conv_desc(d, C.int(s.n), C.int(s.c), C.int(s.h), C.int(s.w), C.int(s.o), C.int(s.k),
		C.int(s.stride), C.int(s.pad), C.int(oh), C.int(ow), C.int(math))
	if err := libCheck("cudnn", "cudnnSet*Descriptor", st); err != nil {
		convDesc{d}.free()
		return convDesc{}, err
	}
	return convDesc{d}, nil
}

func (cd convDesc) free() {
	if cd.d != nil {
		C.dml_cudnn_conv_desc_free(cd.d)
		C.free(unsafe.Pointer(cd.d))
	}
}

// algoPerf is one algorithm cuDNN offers for a direction.
type algoPerf struct {
	algo, status  int
	ms            float32
	memory        int
	deterministic bool
	math          int // the math type it runs with (cudnnFMAMath, cudnnDefaultMath, tensor ops)
}

// Directions of a convolution.
const (
	dirForward = iota
	dirData
	dirFilter
)

// algos lists the algorithms for one direction, best first: cuDNN's
// heuristics, or (find) its timed search on the buffers given.
func (cd convDesc) algos(q queue, h unsafe.Pointer, dir int, find bool, x, w, y, ws devPtr, wsBytes int) ([]algoPerf, error) {
	var perf [16]C.dml_algo_perf
	var got, st C.int
	if err := check("cuCtxSetCurrent", C.dml_cudnn_algos(q.ctx, C.dml_handle(h), cd.d, C.int(dir), C.int(btoi(find)),
		C.CUdeviceptr(x), C.CUdeviceptr(w), C.CUdeviceptr(y), C.CUdeviceptr(ws), C.size_t(wsBytes),
		&perf[0], C.int(len(perf)), &got, &st)); err != nil {
		return nil, err
	}
	call := [3]string{"cudnnGetConvolutionForwardAlgorithm_v7", "cudnnGetConvolutionBackwardDataAlgorithm_v7", "cudnnGetConvolutionBackwardFilterAlgorithm_v7"}[dir]
	if find {
		call = [3]string{"cudnnFindConvolutionForwardAlgorithmEx", "cudnnFindConvolutionBackwardDataAlgorithmEx", "cudnnFindConvolutionBackwardFilterAlgorithmEx"}[dir]
	}
	if err := libCheck("cudnn", call, st); err != nil {
		return nil, err
	}
	out := make([]algoPerf, 0, int(got))
	for _, p := range perf[:min(int(got), len(perf))] {
		out = append(out, algoPerf{algo: int(p.algo), status: int(p.status), ms: float32(p.time), memory: int(p.memory),
			deterministic: p.determinism == 1, math: int(p.mathType)})
	}
	return out, nil
}

// run queues one direction with algo: forward (y, plus the bias when
// not 0), data gradient (into x), filter gradient (into w; bias unused).
func (cd convDesc) run(q queue, h unsafe.Pointer, dir, algo int, x, w, y, bias, ws devPtr, wsBytes int) error {
	call := [3]string{"cudnnConvolutionForward", "cudnnConvolutionBackwardData", "cudnnConvolutionBackwardFilter"}[dir]
	return libCheck("cudnn", call, C.dml_cudnn_conv(q.ctx, C.dml_handle(h), cd.d, C.int(dir), C.int(algo),
		C.CUdeviceptr(x), C.CUdeviceptr(w), C.CUdeviceptr(y), C.CUdeviceptr(bias), C.CUdeviceptr(ws), C.size_t(wsBytes)))
}

// bnDesc is batch norm's cuDNN descriptors, in C memory.
type bnDesc struct{ d *C.dml_bn_desc }

func newBNDesc(n, c, hw int) (bnDesc, error) {
	d := (*C.dml_bn_desc)(C.calloc(1, C.size_t(unsafe.Sizeof(C.dml_bn_desc{}))))
	if err := libCheck("cudnn", "cudnnSetTensor4dDescriptor", C.dml_cudnn_bn_desc(d, C.int(n), C.int(c), C.int(hw))); err != nil {
		bnDesc{d}.free()
		return bnDesc{}, err
	}
	return bnDesc{d}, nil
}

func (bd bnDesc) free() {
	if bd.d != nil {
		C.dml_cudnn_bn_desc_free(bd.d)
		C.free(unsafe.Pointer(bd.d))
	}
}

// cuDNN's batch-norm modes.
const (
	cudnnBNSpatial    = 1
	cudnnBNPersistent = 2
)

func (bd bnDesc) train(q queue, h unsafe.Pointer, mode int, x, y, gamma, beta devPtr, momentum float64, rm, rv devPtr, eps float64, mean, invstd devPtr) error {
	return libCheck("cudnn", "cudnnBatchNormalizationForwardTraining", C.dml_cudnn_bn_train(q.ctx, C.dml_handle(h), bd.d, C.int(mode),
		C.CUdeviceptr(x), C.CUdeviceptr(y), C.CUdeviceptr(gamma), C.CUdeviceptr(beta), C.double(momentum),
		C.CUdeviceptr(rm), C.CUdeviceptr(rv), C.double(eps), C.CUdeviceptr(mean), C.CUdeviceptr(invstd)))
}

func (bd bnDesc) infer(q queue, h unsafe.Pointer, x, y, gamma, beta, rm, rv devPtr, eps float64) error {
	return libCheck("cudnn", "cudnnBatchNormalizationForwardInference", C.dml_cudnn_bn_infer(q.ctx, C.dml_handle(h), bd.d,
		C.CUdeviceptr(x), C.CUdeviceptr(y), C.CUdeviceptr(gamma), C.CUdeviceptr(beta), C.CUdeviceptr(rm), C.CUdeviceptr(rv), C.double(eps)))
}

func (bd bnDesc) grad(q queue, h unsafe.Pointer, mode int, x, dy, dx, gamma, dgamma, dbeta devPtr, eps float64, mean, invstd devPtr) error {
	return libCheck("cudnn", "cudnnBatchNormalizationBackward", C.dml_cudnn_bn_grad(q.ctx, C.dml_handle(h), bd.d, C.int(mode),
		C.CUdeviceptr(x), C.CUdeviceptr(dy), C.CUdeviceptr(dx), C.CUdeviceptr(gamma), C.CUdeviceptr(dgamma), C.CUdeviceptr(dbeta),
		C.double(eps), C.CUdeviceptr(mean), C.CUdeviceptr(invstd)))
}
