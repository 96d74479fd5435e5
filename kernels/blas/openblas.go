//go:build cgo

package blas

// OpenBLAS, loaded at run time with dlopen. The prototypes are declared
// here (cblas's enums are ints: CblasRowMajor 101, CblasNoTrans 111,
// CblasTrans 112), so no BLAS headers are needed to build.

/*
#cgo LDFLAGS: -ldl
#cgo noescape dml_sgemm
#cgo nocallback dml_sgemm
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef void (*sgemm_fn)(int order, int transA, int transB, int m, int n, int k,
	float alpha, const float *a, int lda, const float *b, int ldb,
	float beta, float *c, int ldc);

static sgemm_fn p_sgemm;
static void (*p_set_num_threads)(int);
static int (*p_get_num_threads)(void);
static char *(*p_get_config)(void);

// dml_blas_load sets OPENBLAS_NUM_THREADS to threads when threads > 0 (the
// caller passes 0 when the environment already sets it), then opens path
// and resolves cblas_sgemm (required) and OpenBLAS's thread and config
// functions (optional: another BLAS may not have them). It returns 0, or
// writes why not into msg and returns -1.
static int dml_blas_load(const char *path, int threads, char *msg, int n) {
	if (threads > 0) {
		char buf[32];
		snprintf(buf, sizeof buf, "%d", threads);
		setenv("OPENBLAS_NUM_THREADS", buf, 1);
	}
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(msg, n, "%s", e ? e : "dlopen failed");
		return -1;
	}
	*(void**)(&p_sgemm) = dlsym(h, "cblas_sgemm");
	if (!p_sgemm) {
		snprintf(msg, n, "%s has no cblas_sgemm", path);
		dlclose(h);
		return -1;
	}
	*(void**)(&p_set_num_threads) = dlsym(h, "openblas_set_num_threads");
	*(void**)(&p_get_num_threads) = dlsym(h, "openblas_get_num_threads");
	*(void**)(&p_get_config) = dlsym(h, "openblas_get_config");
	return 0;
}

static void dml_sgemm(int transA, int transB, int m, int n, int k,
	float alpha, const float *a, int lda, const float *b, int ldb,
	float beta, float *c, int ldc) {
	p_sgemm(101, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static int dml_blas_set_threads(int t) {
	if (!p_set_num_threads) return -1;
	p_set_num_threads(t);
	return 0;
}

static int dml_blas_get_threads(void) {
	return p_get_num_threads ? p_get_num_threads() : -1;
}

static const char *dml_blas_config(void) {
	return p_get_config ? p_get_config() : "";
}
*/
import "C"

import (
	"errors"
	"math"
	"unsafe"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// haveCgo is true: this build can load OpenBLAS.
const haveCgo = true

// dlopen loads the library at path and resolves its symbols. threads > 0
// sets OPENBLAS_NUM_THREADS first.
func dlopen(path string, threads int) error {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var msg [512]C.char
	if C.dml_blas_load(cpath, C.int(threads), &msg[0], C.int(len(msg))) != 0 {
		return errors.New(C.GoString(&msg[0]))
	}
	return nil
}

// setThreads calls openblas_set_num_threads; false when the library has
// no such function.
func setThreads(n int) bool { return C.dml_blas_set_threads(C.int(n)) == 0 }

// getThreads returns openblas_get_num_threads(), or -1 when the library
// has no such function.
func getThreads() int { return int(C.dml_blas_get_threads()) }

// libConfig returns openblas_get_config(), or "" without it.
func libConfig() string { return C.GoString(C.dml_blas_config()) }

// openblas runs Sgemm on the loaded library's cblas_sgemm.
type openblas struct{}

// Sgemm calls cblas_sgemm (row-major). Dimensions beyond a C int, which
// cblas cannot take, go to gonum's pure-Go Sgemm instead.
func (openblas) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if max(m, n, k, lda, ldb, ldc) > math.MaxInt32 {
		gonum.Implementation{}.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	C.dml_sgemm(cblasTrans(tA), cblasTrans(tB), C.int(m), C.int(n), C.int(k),
		C.float(alpha), (*C.float)(unsafe.Pointer(&a[0])), C.int(lda),
		(*C.float)(unsafe.Pointer(&b[0])), C.int(ldb),
		C.float(beta), (*C.float)(unsafe.Pointer(&c[0])), C.int(ldc))
}

// cblasTrans maps a gonum transpose to CBLAS_TRANSPOSE.
func cblasTrans(t blas.Transpose) C.int {
	if t == blas.NoTrans {
		return 111
	}
	return 112
}
