//go:build cgo

// Package onednn runs convolutions (forward, data and filter gradients)
// and batch norm (training, inference, gradient) on oneDNN (libdnnl.so.2,
// Intel's deep-learning primitives, Debian's libdnnl2), for the CPU
// backends (kernels/cpu through kernels/blas). The library is opened with
// dlopen, never linked: the few entry points and types of its C API (v2.x)
// are declared below from its public reference, so nothing of it is
// needed to build, and a binary runs where it is absent.
//
// Layouts. Each primitive is made for the memory formats oneDNN prefers
// (format "any" for a convolution: blocked layouts such as nChw16c on
// AVX-512). An output may be left in the primitive's layout, written
// straight into the caller's buffer, when that layout takes exactly the
// plain one's bytes (no padding); the call returns the layout, a Layout
// number of this Lib's, and the caller (package cpu) remembers it for the
// buffer. An input in a layout of this Lib's is read as it is when the
// primitive wants that layout, and reordered into a buffer of the plan's
// otherwise. So a chain convolution → batch norm → ReLU → convolution,
// the ReLU and the residual sums being per element, runs without a
// reorder. Measured on a 2-core Intel Xeon with AVX-512, one thread,
// ResNet-20 at batch 64: a 64×16×32×32 reorder takes 0.5 ms, against 2.1
// ms for the 16-channel convolution's forward pass; reorders at every
// layer were 30% of oneDNN's time.
package onednn

/*
#cgo LDFLAGS: -ldl
#cgo noescape dml_sgemm
#cgo nocallback dml_sgemm
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The C API's types. dnnl_memory_desc_t is 696 bytes in oneDNN 2.6: its
// first fields, ndims and dims (dnnl_dims_t, int64_t[12]), are declared,
// the rest kept as opaque storage with room to spare; the operation
// descriptors likewise (convolution 5976 bytes, batch norm 3496).
typedef struct { int ndims; long long dims[12]; char rest[800]; } dml_md;
typedef struct { long long b[800]; } dml_desc;
typedef long long dml_dims[12];
typedef struct { int arg; void *memory; } dml_arg;
typedef struct { int major, minor, patch; const char *hash; unsigned cpu_runtime, gpu_runtime; } dml_version_t;

static int (*p_engine_create)(void **, int, size_t);
static int (*p_engine_destroy)(void *);
static int (*p_stream_create)(void **, void *, unsigned);
static int (*p_stream_destroy)(void *);
static int (*p_stream_wait)(void *);
static int (*p_md_init)(dml_md *, int, const long long *, int, int);
static int (*p_md_equal)(const dml_md *, const dml_md *);
static size_t (*p_md_size)(const dml_md *);
static int (*p_conv_fwd)(dml_desc *, int, int, const dml_md *, const dml_md *, const dml_md *, const dml_md *,
	const long long *, const long long *, const long long *);
static int (*p_conv_bwd_data)(dml_desc *, int, const dml_md *, const dml_md *, const dml_md *,
	const long long *, const long long *, const long long *);
static int (*p_conv_bwd_w)(dml_desc *, int, const dml_md *, const dml_md *, const dml_md *, const dml_md *,
	const long long *, const long long *, const long long *);
static int (*p_bn_fwd)(dml_desc *, int, const dml_md *, float, unsigned);
static int (*p_bn_bwd)(dml_desc *, int, const dml_md *, const dml_md *, float, unsigned);
static int (*p_pool_fwd)(dml_desc *, int, int, const dml_md *, const dml_md *, const long long *, const long long *,
	const long long *, const long long *);
static int (*p_pool_bwd)(dml_desc *, int, const dml_md *, const dml_md *, const long long *, const long long *,
	const long long *, const long long *);
static int (*p_pd_create)(void **, const void *, const void *, void *, const void *);
static int (*p_pd_destroy)(void *);
static const dml_md *(*p_pd_query_md)(const void *, int, int);
static int (*p_reorder_pd)(void **, const dml_md *, void *, const dml_md *, void *, const void *);
static int (*p_mem_create)(void **, const dml_md *, void *, void *);
static int (*p_mem_destroy)(void *);
static int (*p_mem_set)(void *, void *);
static int (*p_prim_create)(void **, const void *);
static int (*p_prim_destroy)(void *);
static int (*p_prim_exec)(const void *, void *, int, const dml_arg *);
static const dml_version_t *(*p_version)(void);
static int (*p_sgemm)(char, char, long long, long long, long long, float, const float *, long long,
	const float *, long long, float, float *, long long);

#define SYM(var, name) do { *(void**)(&var) = dlsym(h, name); \
	if (!var) { snprintf(msg, n, "%s has no %s", path, name); return -1; } } while (0)

static int dml_dnnl_load(const char *path, char *msg, int n) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) { snprintf(msg, n, "%s", dlerror()); return -1; }
	SYM(p_engine_create, "dnnl_engine_create");
	SYM(p_engine_destroy, "dnnl_engine_destroy");
	SYM(p_stream_create, "dnnl_stream_create");
	SYM(p_stream_destroy, "dnnl_stream_destroy");
	SYM(p_stream_wait, "dnnl_stream_wait");
	SYM(p_md_init, "dnnl_memory_desc_init_by_tag");
	SYM(p_md_equal, "dnnl_memory_desc_equal");
	SYM(p_md_size, "dnnl_memory_desc_get_size");
	SYM(p_conv_fwd, "dnnl_convolution_forward_desc_init");
	SYM(p_conv_bwd_data, "dnnl_convolution_backward_data_desc_init");
	SYM(p_conv_bwd_w, "dnnl_convolution_backward_weights_desc_init");
	SYM(p_bn_fwd, "dnnl_batch_normalization_forward_desc_init");
	SYM(p_bn_bwd, "dnnl_batch_normalization_backward_desc_init");
	SYM(p_pool_fwd, "dnnl_pooling_forward_desc_init");
	SYM(p_pool_bwd, "dnnl_pooling_backward_desc_init");
	SYM(p_pd_create, "dnnl_primitive_desc_create");
	SYM(p_pd_destroy, "dnnl_primitive_desc_destroy");
	SYM(p_pd_query_md, "dnnl_primitive_desc_query_md");
	SYM(p_reorder_pd, "dnnl_reorder_primitive_desc_create");
	SYM(p_mem_create, "dnnl_memory_create");
	SYM(p_mem_destroy, "dnnl_memory_destroy");
	SYM(p_mem_set, "dnnl_memory_set_data_handle");
	SYM(p_prim_create, "dnnl_primitive_create");
	SYM(p_prim_destroy, "dnnl_primitive_destroy");
	SYM(p_prim_exec, "dnnl_primitive_execute");
	SYM(p_version, "dnnl_version");
	SYM(p_sgemm, "dnnl_sgemm");
	return 0;
}

static int dml_sgemm(char ta, char tb, long long m, long long n, long long k, float alpha, const float *a, long long lda,
		const float *b, long long ldb, float beta, float *c, long long ldc) {
	return p_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void dml_dnnl_version(int *a, int *b, int *c) {
	const dml_version_t *v = p_version();
	*a = v->major; *b = v->minor; *c = v->patch;
}

// Constants of the C API (dnnl_types.h, v2.x).
enum {
	DML_CPU = 1, DML_STREAM_DEFAULT = 1, DML_F32 = 3,
	DML_ANY = 1, DML_A = 2,
	DML_FWD_TRAINING = 64, DML_FWD_INFERENCE = 96, DML_BACKWARD = 128, DML_CONV_DIRECT = 1,
	DML_BN_GLOBAL_STATS = 1, DML_BN_RELU = 4, DML_BN_SCALE = 8, DML_BN_SHIFT = 16,
	DML_POOL_MAX = 0x1ff, DML_POOL_AVG = 0x3ff, // pooling_avg_exclude_padding: dml's average pools have none
	DML_Q_EXEC_ARG_MD = 255,
};

static int dml_engine(void **eng, void **stream) {
	int st = p_engine_create(eng, DML_CPU, 0);
	if (st == 0) st = p_stream_create(stream, *eng, DML_STREAM_DEFAULT);
	return st;
}

static void dml_engine_free(void *eng, void *stream) {
	if (stream) p_stream_destroy(stream);
	if (eng) p_engine_destroy(eng);
}

// dml_md_plain sets md to the plain (row-major) layout of ndims dims.
static int dml_md_plain(dml_md *md, int ndims, const long long *dims) {
	return p_md_init(md, ndims, dims, DML_F32, DML_A + ndims - 1);
}

static int dml_md_any(dml_md *md, int ndims, const long long *dims) {
	return p_md_init(md, ndims, dims, DML_F32, DML_ANY);
}

static int dml_md_equal(const dml_md *a, const dml_md *b) { return p_md_equal(a, b); }
static size_t dml_md_size(const dml_md *md) { return p_md_size(md); }

// A primitive with the memory objects of its arguments: each made with
// the md the primitive has for that argument and no data, the caller's
// pointer set as its handle for the one call that uses it (C keeps no Go
// pointer after a call returns).
#define DML_MAXARGS 10
typedef struct {
	void *pd, *prim;
	int nargs;
	int arg[DML_MAXARGS];
	void *mem[DML_MAXARGS];
} dml_op;

// dml_op_make creates the primitive of pd (taking it over) with the
// memory objects of its nargs arguments; args[i] is a DNNL_ARG_* number.
static int dml_op_make(dml_op *o, void *pd, void *eng, int nargs, const int *args) {
	o->pd = pd;
	int st = p_prim_create(&o->prim, pd);
	for (int i = 0; st == 0 && i < nargs; i++) {
		o->arg[i] = args[i];
		st = p_mem_create(&o->mem[i], p_pd_query_md(pd, DML_Q_EXEC_ARG_MD, args[i]), eng, NULL);
		o->nargs = i + 1;
	}
	return st;
}

static const dml_md *dml_op_md(dml_op *o, int i) { return p_pd_query_md(o->pd, DML_Q_EXEC_ARG_MD, o->arg[i]); }

static void dml_op_free(dml_op *o) {
	for (int i = 0; i < o->nargs; i++) if (o->mem[i]) p_mem_destroy(o->mem[i]);
	if (o->prim) p_prim_destroy(o->prim);
	if (o->pd) p_pd_destroy(o->pd);
	memset(o, 0, sizeof *o);
}

// dml_op_run runs o on the pointers given, one per argument, in order, and
// waits for it.
static int dml_op_run(dml_op *o, void *stream, void *p0, void *p1, void *p2, void *p3, void *p4, void *p5, void *p6, void *p7, void *p8, void *p9) {
	void *p[DML_MAXARGS] = {p0, p1, p2, p3, p4, p5, p6, p7, p8, p9};
	dml_arg a[DML_MAXARGS];
	for (int i = 0; i < o->nargs; i++) {
		p_mem_set(o->mem[i], p[i]);
		a[i].arg = o->arg[i];
		a[i].memory = o->mem[i];
	}
	int st = p_prim_exec(o->prim, stream, o->nargs, a);
	if (st == 0) st = p_stream_wait(stream);
	for (int i = 0; i < o->nargs; i++) p_mem_set(o->mem[i], NULL);
	return st;
}

enum {
	DML_ARG_SRC = 1, DML_ARG_DST = 17, DML_ARG_WEIGHTS = 33, DML_ARG_BIAS = 41,
	DML_ARG_MEAN = 49, DML_ARG_VARIANCE = 50, DML_ARG_SCALE = 51, DML_ARG_SHIFT = 52, DML_ARG_WORKSPACE = 64,
	DML_ARG_DIFF_SRC = 129, DML_ARG_DIFF_DST = 145, DML_ARG_DIFF_WEIGHTS = 161, DML_ARG_DIFF_BIAS = 169,
	DML_ARG_DIFF_SCALE = 255, DML_ARG_DIFF_SHIFT = 256,
};

static int dml_reorder_make(dml_op *o, const dml_md *from, const dml_md *to, void *eng) {
	void *pd;
	int st = p_reorder_pd(&pd, from, eng, to, eng, NULL);
	if (st != 0) return st;
	int args[2] = {DML_ARG_SRC, DML_ARG_DST};
	return dml_op_make(o, pd, eng, 2, args);
}

// The convolution's three primitives for x n×c×h×w, weights o×c×k×k, y
// n×o×oh×ow in the layouts oneDNN prefers (hint: the forward pd, for the
// backward ones). dir: 0 forward, 1 data gradient, 2 filter gradient.
static int dml_conv_make(dml_op *op, int dir, void *eng, const void *hint, long long n, long long c, long long h, long long w,
		long long o, long long k, long long stride, long long pad, long long oh, long long ow, int bias) {
	dml_dims xd = {n, c, h, w}, wd = {o, c, k, k}, yd = {n, o, oh, ow}, bd = {o};
	dml_dims strides = {stride, stride}, pads = {pad, pad};
	dml_md x, wt, y, b;
	int st;
	if ((st = dml_md_any(&x, 4, xd)) || (st = dml_md_any(&wt, 4, wd)) || (st = dml_md_any(&y, 4, yd)) || (st = dml_md_plain(&b, 1, bd))) return st;
	dml_desc *d = malloc(sizeof(dml_desc));
	if (!d) return -2;
	void *pd = NULL;
	int args[4], nargs = 0;
	switch (dir) {
	case 0:
		st = p_conv_fwd(d, DML_FWD_TRAINING, DML_CONV_DIRECT, &x, &wt, bias ? &b : NULL, &y, strides, pads, pads);
		args[0] = DML_ARG_SRC; args[1] = DML_ARG_WEIGHTS; args[2] = DML_ARG_DST; args[3] = DML_ARG_BIAS;
		nargs = bias ? 4 : 3;
		break;
	case 1:
		st = p_conv_bwd_data(d, DML_CONV_DIRECT, &x, &wt, &y, strides, pads, pads);
		args[0] = DML_ARG_DIFF_DST; args[1] = DML_ARG_WEIGHTS; args[2] = DML_ARG_DIFF_SRC;
		nargs = 3;
		break;
	default:
		st = p_conv_bwd_w(d, DML_CONV_DIRECT, &x, &wt, bias ? &b : NULL, &y, strides, pads, pads);
		args[0] = DML_ARG_SRC; args[1] = DML_ARG_DIFF_DST; args[2] = DML_ARG_DIFF_WEIGHTS; args[3] = DML_ARG_DIFF_BIAS;
		nargs = bias ? 4 : 3;
	}
	if (st == 0) st = p_pd_create(&pd, d, NULL, eng, hint);
	free(d);
	if (st != 0) return st;
	return dml_op_make(op, pd, eng, nargs, args);
}

// The batch norm's primitives over data in layout md (n×c×…), with
// separate scale and shift. dir: 0 training forward, 1 inference, 2
// backward (hint: the training forward pd). relu fuses the ReLU on the
// output: training and backward then take a workspace (the ReLU's mask)
// as their last argument.
static int dml_bn_make(dml_op *op, int dir, void *eng, const void *hint, const dml_md *md, float eps, int relu) {
	dml_desc *d = malloc(sizeof(dml_desc));
	if (!d) return -2;
	static const int fwd[] = {DML_ARG_SRC, DML_ARG_DST, DML_ARG_MEAN, DML_ARG_VARIANCE, DML_ARG_SCALE, DML_ARG_SHIFT, DML_ARG_WORKSPACE};
	static const int bwd[] = {DML_ARG_SRC, DML_ARG_DIFF_DST, DML_ARG_MEAN, DML_ARG_VARIANCE, DML_ARG_SCALE,
		DML_ARG_DIFF_SRC, DML_ARG_DIFF_SCALE, DML_ARG_DIFF_SHIFT, DML_ARG_SHIFT, DML_ARG_WORKSPACE};
	unsigned flags = DML_BN_SCALE | DML_BN_SHIFT;
	if (relu) flags |= DML_BN_RELU;
	const int *args = fwd;
	int st, nargs = relu ? 7 : 6;
	switch (dir) {
	case 0:
		st = p_bn_fwd(d, DML_FWD_TRAINING, md, eps, flags);
		break;
	case 1:
		st = p_bn_fwd(d, DML_FWD_INFERENCE, md, eps, flags | DML_BN_GLOBAL_STATS);
		nargs = 6;
		break;
	default:
		st = p_bn_bwd(d, DML_BACKWARD, md, md, eps, flags);
		args = bwd;
		nargs = relu ? 10 : 9; // the shift too: oneDNN 2.6 asks for it (unread without a fused ReLU)
	}
	void *pd = NULL;
	if (st == 0) st = p_pd_create(&pd, d, NULL, eng, hint);
	free(d);
	if (st != 0) return st;
	return dml_op_make(op, pd, eng, nargs, args);
}

// The pooling's primitives over x in layout md (n×c×h×w): k×k windows at
// stride, padded by pad on each side (a maximum ignores the padding, as
// PyTorch's −∞ does; oneDNN's output size is floor((h + 2·pad − k) /
// stride) + 1, PyTorch's), y n×c×oh×ow in the layout oneDNN prefers for
// md. dir: 0 training forward (max: with a workspace, the maxima's
// positions, as its last argument), 1 backward (hint: the forward pd).
static int dml_pool_make(dml_op *op, int dir, void *eng, const void *hint, const dml_md *md,
		long long oh, long long ow, long long k, long long stride, long long pad, int max) {
	dml_dims yd = {md->dims[0], md->dims[1], oh, ow}, ks = {k, k}, strides = {stride, stride}, pads = {pad, pad};
	dml_md y;
	int st = dml_md_any(&y, 4, yd);
	if (st != 0) return st;
	dml_desc *d = malloc(sizeof(dml_desc));
	if (!d) return -2;
	int alg = max ? DML_POOL_MAX : DML_POOL_AVG;
	int args[3];
	if (dir == 0) {
		st = p_pool_fwd(d, DML_FWD_TRAINING, alg, md, &y, strides, ks, pads, pads);
		args[0] = DML_ARG_SRC; args[1] = DML_ARG_DST;
	} else {
		st = p_pool_bwd(d, alg, md, &y, strides, ks, pads, pads);
		args[0] = DML_ARG_DIFF_DST; args[1] = DML_ARG_DIFF_SRC;
	}
	args[2] = DML_ARG_WORKSPACE;
	void *pd = NULL;
	if (st == 0) st = p_pd_create(&pd, d, NULL, eng, hint);
	free(d);
	if (st != 0) return st;
	return dml_op_make(op, pd, eng, max ? 3 : 2, args);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// Soname is the library this package opens: oneDNN 2 (the C API used here
// is 2.x's; oneDNN 3 changed it).
const Soname = "libdnnl.so.2"

// DirEnv names the variable that, when set, is the one folder Soname is
// loaded from (instead of the loader's search: LD_LIBRARY_PATH, the
// system's folders).
const DirEnv = "DML_ONEDNN_DIR"

var lib struct {
	once    sync.Once
	version string
	err     error
}

// Load opens the library once per process (threads, when OMP_NUM_THREADS
// is unset, becomes the OpenMP thread count its primitives use: one per
// rank by default, as for OpenBLAS) and returns its version ("2.6.3"), or
// why it cannot be used.
func Load(threads int) (string, error) {
	lib.once.Do(func() {
		if v := os.Getenv("OMP_NUM_THREADS"); strings.TrimSpace(v) == "" { // unset or empty (which OpenMP refuses)
			os.Setenv("OMP_NUM_THREADS", strconv.Itoa(max(threads, 1)))
		}
		name := Soname
		if dir := os.Getenv(DirEnv); dir != "" {
			name = filepath.Join(dir, Soname)
		}
		path := C.CString(name)
		defer C.free(unsafe.Pointer(path))
		var msg [512]C.char
		if C.dml_dnnl_load(path, &msg[0], C.int(len(msg))) != 0 {
			lib.err = fmt.Errorf("%s", C.GoString(&msg[0]))
			return
		}
		var a, b, c C.int
		C.dml_dnnl_version(&a, &b, &c)
		lib.version = fmt.Sprintf("%d.%d.%d", a, b, c)
		if a != 2 {
			lib.err = fmt.Errorf("%s is oneDNN %s: dml uses oneDNN 2's C API", Soname, lib.version)
		}
	})
	return lib.version, lib.err
}

// Sgemm is dnnl_sgemm, row-major: C = alpha·op(A)·op(B) + beta·C with
// op(A) m×k, op(B) k×n (the CBLAS convention; beta 0 overwrites C). Load
// must have succeeded. It runs on the calling thread's OpenMP team.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) error {
	ta, tb := C.char('N'), C.char('N')
	if transA {
		ta = 'T'
	}
	if transB {
		tb = 'T'
	}
	if st := C.dml_sgemm(ta, tb, C.longlong(m), C.longlong(n), C.longlong(k), C.float(alpha), (*C.float)(ptr(a)), C.longlong(lda),
		(*C.float)(ptr(b)), C.longlong(ldb), C.float(beta), (*C.float)(ptr(c)), C.longlong(ldc)); st != 0 {
		return fmt.Errorf("onednn: sgemm %d×%d×%d: %v", m, n, k, status(st))
	}
	return nil
}

// Shape is a convolution's dimensions (PyTorch's layouts).
type Shape struct{ N, C, H, W, O, K, Stride, Pad int }

// Layout says how a buffer's elements lie: Plain (0) is dml's own
// (row-major: NCHW activations, OIHW weights); other values are layouts of
// one Lib's primitives (each a memory format with its dimensions), given
// out by its calls and meaningful to that Lib only.
type Layout int32

// Plain is dml's own layout.
const Plain Layout = 0

// Lib runs oneDNN's primitives, made on first use for each shape and
// kept. Like a kernels.Backend it is used by one goroutine at a time.
type Lib struct {
	eng, stream unsafe.Pointer
	layouts     []*C.dml_md // Layout i+1
	reorders    map[[2]Layout]*op
	convs       map[convKey][]*op
	norms       map[normKey][]*op
	pools       map[PoolShape][]*op
	closed      bool
}

type convKey struct {
	Shape
	bias bool
}

type normKey struct {
	l        Layout // the data's layout; Plain: n×c×hw×1
	n, c, hw int
	eps      float32
	relu     bool // the ReLU fused on the output
}

// op is a primitive with, for each argument, its layout and, where the
// caller's buffer cannot be used as it is, a buffer of the primitive's own.
type op struct {
	c       *C.dml_op
	layouts []Layout
	own     [][]float32 // per argument, made on first need
}

// New returns a Lib; Load must have succeeded.
func New() (*Lib, error) {
	l := &Lib{reorders: map[[2]Layout]*op{}, convs: map[convKey][]*op{}, norms: map[normKey][]*op{}, pools: map[PoolShape][]*op{}}
	if st := C.dml_engine(&l.eng, &l.stream); st != 0 {
		C.dml_engine_free(l.eng, l.stream)
		return nil, fmt.Errorf("onednn: creating the CPU engine: %v", status(st))
	}
	return l, nil
}

// Close releases every primitive and the engine.
func (l *Lib) Close() {
	if l.closed {
		return
	}
	l.closed = true
	for _, o := range l.reorders {
		o.free()
	}
	for _, ops := range l.convs {
		for _, o := range ops {
			o.free()
		}
	}
	for _, ops := range l.norms {
		for _, o := range ops {
			o.free()
		}
	}
	for _, ops := range l.pools {
		for _, o := range ops {
			o.free()
		}
	}
	for _, md := range l.layouts {
		C.free(unsafe.Pointer(md))
	}
	l.reorders, l.convs, l.norms, l.pools, l.layouts = nil, nil, nil, nil, nil
	C.dml_engine_free(l.eng, l.stream)
}

func (o *op) free() {
	if o != nil && o.c != nil {
		C.dml_op_free(o.c)
		C.free(unsafe.Pointer(o.c))
		o.c = nil
	}
}

// layout returns md's Layout: Plain for the plain layout of its dims,
// else its number, given on first sight.
func (l *Lib) layout(md *C.dml_md) (Layout, error) {
	plain, err := l.md(Plain, md)
	if err != nil {
		return 0, err
	}
	if C.dml_md_equal(md, plain) != 0 {
		return Plain, nil
	}
	for i, k := range l.layouts {
		if C.dml_md_equal(md, k) != 0 {
			return Layout(i + 1), nil
		}
	}
	k := (*C.dml_md)(C.malloc(C.size_t(unsafe.Sizeof(C.dml_md{}))))
	*k = *md
	l.layouts = append(l.layouts, k)
	return Layout(len(l.layouts)), nil
}

// md returns layout x's memory descriptor; for Plain, the plain one of
// like's dims.
func (l *Lib) md(x Layout, like *C.dml_md) (*C.dml_md, error) {
	if x != Plain {
		if int(x) > len(l.layouts) || x < 0 {
			return nil, fmt.Errorf("onednn: layout %d is not one of this library's", x)
		}
		return l.layouts[x-1], nil
	}
	plain := new(C.dml_md)
	if st := C.dml_md_plain(plain, like.ndims, &like.dims[0]); st != 0 {
		return nil, fmt.Errorf("onednn: a plain memory descriptor: %v", status(st))
	}
	return plain, nil
}

// Floats is the number of float32 a buffer in layout x takes (its
// padding included); Plain: 0 (the caller knows).
func (l *Lib) Floats(x Layout) int {
	if x <= 0 || int(x) > len(l.layouts) {
		return 0
	}
	return int(C.dml_md_size(l.layouts[x-1])) / 4
}

// newOp wraps a made dml_op: the layouts of its arguments.
func (l *Lib) newOp(c *C.dml_op) (*op, error) {
	o := &op{c: c, layouts: make([]Layout, c.nargs), own: make([][]float32, c.nargs)}
	for i := range o.layouts {
		x, err := l.layout(C.dml_op_md(c, C.int(i)))
		if err != nil {
			o.free()
			return nil, err
		}
		o.layouts[i] = x
	}
	return o, nil
}

func newCOp() *C.dml_op {
	return (*C.dml_op)(C.calloc(1, C.size_t(unsafe.Sizeof(C.dml_op{}))))
}

// Reorder writes src, in layout from, into dst in layout to (the same
// dimensions; one of the two may be Plain). dst and src must not overlap.
func (l *Lib) Reorder(dst, src []float32, from, to Layout) error {
	if from == to {
		copy(dst, src)
		return nil
	}
	o, err := l.reorder(from, to)
	if err != nil {
		return err
	}
	if n := l.size(o, 0, len(src)); len(src) < n || len(dst) < l.size(o, 1, len(dst)) {
		return fmt.Errorf("onednn: reorder of %d floats into %d: layouts %d→%d want %d", len(src), len(dst), from, to, n)
	}
	if err := o.run(l, ptr(src), ptr(dst)); err != nil {
		return fmt.Errorf("onednn: reorder from layout %d to %d: %w", from, to, err)
	}
	return nil
}

// size is the floats argument i of o takes: its layout's, or n for Plain.
func (l *Lib) size(o *op, i, n int) int {
	if o.layouts[i] == Plain {
		return n
	}
	return l.Floats(o.layouts[i])
}

func (l *Lib) reorder(from, to Layout) (*op, error) {
	key := [2]Layout{from, to}
	if o := l.reorders[key]; o != nil {
		return o, nil
	}
	var like *C.dml_md
	switch {
	case from != Plain && int(from) <= len(l.layouts):
		like = l.layouts[from-1]
	case to != Plain && int(to) <= len(l.layouts):
		like = l.layouts[to-1]
	default:
		return nil, fmt.Errorf("onednn: no reorder from layout %d to %d", from, to)
	}
	fm, err := l.md(from, like)
	if err != nil {
		return nil, err
	}
	tm, err := l.md(to, like)
	if err != nil {
		return nil, err
	}
	c := newCOp()
	if st := C.dml_reorder_make(c, fm, tm, l.eng); st != 0 {
		C.dml_op_free(c)
		C.free(unsafe.Pointer(c))
		return nil, fmt.Errorf("onednn: creating the reorder from layout %d to %d: %v", from, to, status(st))
	}
	o := &op{c: c, layouts: []Layout{from, to}, own: make([][]float32, 2)}
	l.reorders[key] = o
	return o, nil
}

// in returns the pointer argument i of o reads x (in layout have) from:
// x itself when the primitive wants that layout, else its own buffer with
// x reordered into it.
func (l *Lib) in(o *op, i int, x []float32, have Layout) (unsafe.Pointer, error) {
	want := o.layouts[i]
	if have == want {
		return ptr(x), nil
	}
	buf := o.buffer(l, i, len(x))
	if err := l.Reorder(buf, x, have, want); err != nil {
		return nil, err
	}
	return ptr(buf), nil
}

// out returns where argument i of o writes its result for y, and the
// layout y will be in: y itself, in the primitive's layout, when that is
// Plain or (keep) takes exactly y's floats; else o's own buffer, which
// done reorders into y.
func (l *Lib) out(o *op, i int, y []float32, keep bool) (unsafe.Pointer, Layout) {
	want := o.layouts[i]
	if want == Plain || keep && l.Floats(want) == len(y) {
		return ptr(y), want
	}
	return ptr(o.buffer(l, i, len(y))), Plain
}

// done reorders argument i's own buffer into y where out chose it.
func (l *Lib) done(o *op, i int, y []float32, got Layout) error {
	if got == o.layouts[i] {
		return nil
	}
	return l.Reorder(y, o.own[i], o.layouts[i], Plain)
}

func (o *op) buffer(l *Lib, i, n int) []float32 {
	if want := l.size(o, i, n); len(o.own[i]) < want {
		o.own[i] = make([]float32, want)
	}
	return o.own[i]
}

// run runs the primitive on one pointer per argument. Its error is the
// status alone: the caller names the op (formatting that only when it
// fails, not at every call).
func (o *op) run(l *Lib, p ...unsafe.Pointer) error {
	var a [10]unsafe.Pointer
	copy(a[:], p)
	if st := C.dml_op_run(o.c, l.stream, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9]); st != 0 {
		return errors.New(status(st))
	}
	return nil
}

// status names a dnnl_status_t (dnnl_types.h) for an error message.
func status(st C.int) string {
	names := [...]string{"success", "out of memory", "invalid arguments", "unimplemented", "iterator ends", "runtime error", "not required"}
	if st >= 0 && int(st) < len(names) {
		return fmt.Sprintf("status %d (%s)", int(st), names[st])
	}
	return fmt.Sprintf("status %d", int(st))
}

func ptr(x []float32) unsafe.Pointer {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Pointer(&x[0])
}

// conv returns shape s's primitives: forward, data gradient, filter
// gradient.
func (l *Lib) conv(s Shape, bias bool) ([]*op, error) {
	key := convKey{s, bias}
	if ops := l.convs[key]; ops != nil {
		return ops, nil
	}
	oh, ow := (s.H+2*s.Pad-s.K)/s.Stride+1, (s.W+2*s.Pad-s.K)/s.Stride+1
	b := C.int(0)
	if bias {
		b = 1
	}
	ops, err := l.makeOps(fmt.Sprintf("%+v", s), []string{"forward", "data-gradient", "filter-gradient"}, func(c *C.dml_op, dir int, hint unsafe.Pointer) C.int {
		return C.dml_conv_make(c, C.int(dir), l.eng, hint, C.longlong(s.N), C.longlong(s.C), C.longlong(s.H), C.longlong(s.W),
			C.longlong(s.O), C.longlong(s.K), C.longlong(s.Stride), C.longlong(s.Pad), C.longlong(oh), C.longlong(ow), b)
	})
	if err != nil {
		return nil, err
	}
	l.convs[key] = ops
	return ops, nil
}

// makeOps makes an op's primitives, one for each of dirs, with mk (dir
// 0, 1, …; hint: the first one's descriptor, nil for the first itself),
// freeing them all if one fails; what and dirs name them in the error.
func (l *Lib) makeOps(what string, dirs []string, mk func(c *C.dml_op, dir int, hint unsafe.Pointer) C.int) ([]*op, error) {
	ops := make([]*op, len(dirs))
	for dir := range dirs {
		c := newCOp()
		var hint unsafe.Pointer
		if ops[0] != nil {
			hint = ops[0].c.pd
		}
		var err error
		if st := mk(c, dir, hint); st == 0 {
			ops[dir], err = l.newOp(c)
		} else {
			C.dml_op_free(c)
			C.free(unsafe.Pointer(c))
			err = fmt.Errorf("%v", status(st))
		}
		if err != nil {
			for _, o := range ops {
				o.free()
			}
			return nil, fmt.Errorf("onednn: %s: creating the %s primitive: %v", what, dirs[dir], err)
		}
	}
	return ops, nil
}

// Forward sets y = x ⋆ w (+ bias when not nil); x is in layout xl. It
// returns y's layout (see the package comment). The lengths are the
// caller's to check.
func (l *Lib) Forward(y, x, w, bias []float32, xl Layout, s Shape) (Layout, error) {
	ops, err := l.conv(s, bias != nil)
	if err != nil {
		return Plain, err
	}
	o := ops[0]
	px, err := l.in(o, 0, x, xl)
	if err != nil {
		return Plain, err
	}
	pw, err := l.in(o, 1, w, Plain)
	if err != nil {
		return Plain, err
	}
	py, yl := l.out(o, 2, y, true)
	if err := o.run(l, px, pw, py, ptr(bias)); err != nil {
		return Plain, fmt.Errorf("onednn: %+v: forward: %w", s, err)
	}
	return yl, l.done(o, 2, y, yl)
}

// BackwardData sets dx to the gradient of the convolution's input; dy is
// in layout dyl. It returns dx's layout.
func (l *Lib) BackwardData(dx, dy, w []float32, dyl Layout, s Shape) (Layout, error) {
	bias := l.convs[convKey{s, true}] != nil // either shape's plan serves
	ops, err := l.conv(s, bias)
	if err != nil {
		return Plain, err
	}
	o := ops[1]
	pdy, err := l.in(o, 0, dy, dyl)
	if err != nil {
		return Plain, err
	}
	pw, err := l.in(o, 1, w, Plain)
	if err != nil {
		return Plain, err
	}
	pdx, dxl := l.out(o, 2, dx, true)
	if err := o.run(l, pdy, pw, pdx); err != nil {
		return Plain, fmt.Errorf("onednn: %+v: data gradient: %w", s, err)
	}
	return dxl, l.done(o, 2, dx, dxl)
}

// BackwardFilter sets dw (and db when not nil) to the gradients of the
// weights (and the bias), plain; x is in layout xl, dy in dyl.
func (l *Lib) BackwardFilter(dw, db, x, dy []float32, xl, dyl Layout, s Shape) error {
	ops, err := l.conv(s, db != nil)
	if err != nil {
		return err
	}
	o := ops[2]
	px, err := l.in(o, 0, x, xl)
	if err != nil {
		return err
	}
	pdy, err := l.in(o, 1, dy, dyl)
	if err != nil {
		return err
	}
	pdw, dwl := l.out(o, 2, dw, false)
	if err := o.run(l, px, pdy, pdw, ptr(db)); err != nil {
		return fmt.Errorf("onednn: %+v: filter gradient: %w", s, err)
	}
	return l.done(o, 2, dw, dwl)
}

// norm returns the batch norm's primitives for data in layout xl (Plain:
// n×c×hw) — training forward, inference, backward, with the ReLU fused
// where relu says — or an error when xl is not n×c×… with h·w = hw.
func (l *Lib) norm(xl Layout, n, c, hw int, eps float32, relu bool) ([]*op, error) {
	key := normKey{xl, n, c, hw, eps, relu}
	if ops := l.norms[key]; ops != nil {
		return ops, nil
	}
	var md *C.dml_md
	if xl == Plain {
		md = new(C.dml_md)
		dims := [12]C.longlong{C.longlong(n), C.longlong(c), C.longlong(hw), 1}
		if st := C.dml_md_plain(md, 4, &dims[0]); st != 0 {
			return nil, fmt.Errorf("onednn: batch norm %d×%d×%d: a memory descriptor: %v", n, c, hw, status(st))
		}
	} else {
		var err error
		if md, err = l.md(xl, nil); err != nil {
			return nil, err
		}
		d := md.dims
		if md.ndims != 4 || int(d[0]) != n || int(d[1]) != c || int(d[2]*d[3]) != hw {
			return nil, fmt.Errorf("onednn: batch norm %d×%d×%d on data of layout %d (%d dims %v)", n, c, hw, xl, int(md.ndims), d[:md.ndims])
		}
	}
	ops, err := l.makeOps(fmt.Sprintf("batch norm %d×%d×%d", n, c, hw), []string{"training", "inference", "backward"}, func(op *C.dml_op, dir int, hint unsafe.Pointer) C.int {
		if dir != 2 {
			hint = nil
		}
		r := 0
		if relu {
			r = 1
		}
		return C.dml_bn_make(op, C.int(dir), l.eng, hint, md, C.float(eps), C.int(r))
	})
	if err != nil {
		return nil, err
	}
	l.norms[key] = ops
	return ops, nil
}

// NormTrain normalises x (layout xl, n×c×hw) with its own statistics:
// y = gamma·(x − mean)/√(var + eps) + beta, and writes the batch's mean
// and (biased) variance. y is in x's layout, which it returns.
func (l *Lib) NormTrain(y, mean, variance, x, gamma, beta []float32, xl Layout, n, c, hw int, eps float32) (Layout, error) {
	ops, err := l.norm(xl, n, c, hw, eps, false)
	if err != nil {
		return Plain, err
	}
	if err := ops[0].run(l, ptr(x), ptr(y), ptr(mean), ptr(variance), ptr(gamma), ptr(beta)); err != nil {
		return Plain, fmt.Errorf("onednn: batch norm %d×%d×%d: training: %w", n, c, hw, err)
	}
	return xl, nil
}

// NormInfer normalises x with the given (running) mean and variance.
func (l *Lib) NormInfer(y, x, mean, variance, gamma, beta []float32, xl Layout, n, c, hw int, eps float32) (Layout, error) {
	ops, err := l.norm(xl, n, c, hw, eps, false)
	if err != nil {
		return Plain, err
	}
	if err := ops[1].run(l, ptr(x), ptr(y), ptr(mean), ptr(variance), ptr(gamma), ptr(beta)); err != nil {
		return Plain, fmt.Errorf("onednn: batch norm %d×%d×%d: inference: %w", n, c, hw, err)
	}
	return xl, nil
}

// NormGrad is NormTrain's backward pass given the batch's mean and
// variance: dx (in x's layout, returned), dgamma, dbeta. dy is in layout
// dyl, reordered to x's where they differ.
func (l *Lib) NormGrad(dx, dgamma, dbeta, dy, x, mean, variance, gamma []float32, dyl, xl Layout, n, c, hw int, eps float32) (Layout, error) {
	return l.normGrad(dx, dgamma, dbeta, dy, x, mean, variance, gamma, nil, dyl, xl, n, c, hw, eps)
}

// normGrad is NormGrad, and with a workspace NormReluGrad.
func (l *Lib) normGrad(dx, dgamma, dbeta, dy, x, mean, variance, gamma, ws []float32, dyl, xl Layout, n, c, hw int, eps float32) (Layout, error) {
	ops, err := l.norm(xl, n, c, hw, eps, ws != nil)
	if err != nil {
		return Plain, err
	}
	o := ops[2]
	pdy, err := l.in(o, 1, dy, dyl)
	if err != nil {
		return Plain, err
	}
	var pws unsafe.Pointer
	if ws != nil {
		pws = ptr(ws)
	}
	if err := o.run(l, ptr(x), pdy, ptr(mean), ptr(variance), ptr(gamma), ptr(dx), ptr(dgamma), ptr(dbeta), ptr(o.buffer(l, 8, c)), pws); err != nil {
		return Plain, fmt.Errorf("onednn: batch norm %d×%d×%d: backward: %w", n, c, hw, err)
	}
	return xl, nil
}

// NormReluWorkspace is how many float32 the workspace of NormReluTrain
// and NormReluGrad holds (the ReLU's mask, in oneDNN's own format) for
// data in layout xl.
func (l *Lib) NormReluWorkspace(xl Layout, n, c, hw int, eps float32) (int, error) {
	ops, err := l.norm(xl, n, c, hw, eps, true)
	if err != nil {
		return 0, err
	}
	bytes := int(C.dml_md_size(C.dml_op_md(ops[0].c, 6)))
	return (bytes + 3) / 4, nil
}

// NormReluTrain is NormTrain with y = max(y, 0), fused: the mask goes to
// ws (NormReluWorkspace floats) for NormReluGrad.
func (l *Lib) NormReluTrain(y, mean, variance, ws, x, gamma, beta []float32, xl Layout, n, c, hw int, eps float32) (Layout, error) {
	ops, err := l.norm(xl, n, c, hw, eps, true)
	if err != nil {
		return Plain, err
	}
	if err := ops[0].run(l, ptr(x), ptr(y), ptr(mean), ptr(variance), ptr(gamma), ptr(beta), ptr(ws)); err != nil {
		return Plain, fmt.Errorf("onednn: batch norm + ReLU %d×%d×%d: training: %w", n, c, hw, err)
	}
	return xl, nil
}

// NormReluGrad is NormGrad through the fused ReLU: dy is the ReLU
// output's gradient, ws NormReluTrain's mask.
func (l *Lib) NormReluGrad(dx, dgamma, dbeta, dy, x, mean, variance, gamma, ws []float32, dyl, xl Layout, n, c, hw int, eps float32) (Layout, error) {
	return l.normGrad(dx, dgamma, dbeta, dy, x, mean, variance, gamma, ws, dyl, xl, n, c, hw, eps)
}

// PoolShape is a pool's: x n×c×h×w in layout X, k×k windows at Stride,
// padded by Pad; the maximum (Max) or the mean.
type PoolShape struct {
	X                          Layout
	N, C, H, W, K, Stride, Pad int
	Max                        bool
}

// pool returns s's primitives, forward (training) and backward: made for
// x in its layout, their output in the layout oneDNN prefers for it.
func (l *Lib) pool(s PoolShape) ([]*op, error) {
	if ops := l.pools[s]; ops != nil {
		return ops, nil
	}
	var err error
	md := new(C.dml_md)
	if s.X == Plain {
		dims := [12]C.longlong{C.longlong(s.N), C.longlong(s.C), C.longlong(s.H), C.longlong(s.W)}
		if st := C.dml_md_plain(md, 4, &dims[0]); st != 0 {
			return nil, fmt.Errorf("onednn: %s: a memory descriptor: %v", s, status(st))
		}
	} else if md, err = l.md(s.X, nil); err != nil {
		return nil, err
	}
	if md.ndims != 4 || int(md.dims[0]) != s.N || int(md.dims[1]) != s.C || int(md.dims[2]) != s.H || int(md.dims[3]) != s.W {
		return nil, fmt.Errorf("onednn: pool of %d×%d×%d×%d on data of layout %d", s.N, s.C, s.H, s.W, s.X)
	}
	oh, ow := (s.H+2*s.Pad-s.K)/s.Stride+1, (s.W+2*s.Pad-s.K)/s.Stride+1
	m := C.int(0)
	if s.Max {
		m = 1
	}
	ops, err := l.makeOps(s.String(), []string{"forward", "backward"}, func(c *C.dml_op, dir int, hint unsafe.Pointer) C.int {
		return C.dml_pool_make(c, C.int(dir), l.eng, hint, md, C.longlong(oh), C.longlong(ow), C.longlong(s.K), C.longlong(s.Stride), C.longlong(s.Pad), m)
	})
	if err != nil {
		return nil, err
	}
	l.pools[s] = ops
	return ops, nil
}

// String names the pool in errors: "max pool 3s2p1 of 8×64×112×112".
func (s PoolShape) String() string {
	kind := "average"
	if s.Max {
		kind = "max"
	}
	return fmt.Sprintf("%s pool %ds%dp%d of %d×%d×%d×%d", kind, s.K, s.Stride, s.Pad, s.N, s.C, s.H, s.W)
}

// PoolWorkspace is how many float32 the workspace of s's PoolForward and
// PoolBackward holds (a max pool's positions of the maxima, in oneDNN's
// own format; 0 for an average pool).
func (l *Lib) PoolWorkspace(s PoolShape) (int, error) {
	ops, err := l.pool(s)
	if err != nil || !s.Max {
		return 0, err
	}
	return (int(C.dml_md_size(C.dml_op_md(ops[0].c, 2))) + 3) / 4, nil
}

// PoolForward pools x (in layout s.X, plain or one of this Lib's) into y, left in
// the primitive's layout, which it returns; a max pool writes the
// positions of its maxima to ws (PoolWorkspace floats) for PoolBackward.
func (l *Lib) PoolForward(y, ws, x []float32, s PoolShape) (Layout, error) {
	ops, err := l.pool(s)
	if err != nil {
		return Plain, err
	}
	o := ops[0]
	py, yl := l.out(o, 1, y, true)
	if err := o.run(l, ptr(x), py, ptr(ws)); err != nil {
		return Plain, fmt.Errorf("onednn: %s: forward: %w", s, err)
	}
	return yl, l.done(o, 1, y, yl)
}

// PoolBackward sets dx, in x's layout s.X, to the gradient of the pool's
// input given dy (in layout dyl) and PoolForward's workspace.
func (l *Lib) PoolBackward(dx, dy, ws []float32, dyl Layout, s PoolShape) (Layout, error) {
	ops, err := l.pool(s)
	if err != nil {
		return Plain, err
	}
	o := ops[1]
	pdy, err := l.in(o, 0, dy, dyl)
	if err != nil {
		return Plain, err
	}
	pdx, dxl := l.out(o, 1, dx, true)
	if err := o.run(l, pdy, pdx, ptr(ws)); err != nil {
		return Plain, fmt.Errorf("onednn: %s: backward: %w", s, err)
	}
	return dxl, l.done(o, 1, dx, dxl)
}
