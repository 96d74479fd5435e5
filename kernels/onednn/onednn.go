//go:build cgo

// Package onednn runs a convolution layer's three products (forward, data
// and filter gradients) on oneDNN (libdnnl.so.2, Intel's deep-learning
// primitives, Debian's libdnnl2), for the CPU backends' WholeConvOps
// (kernels/cpu). The library is opened with dlopen, never linked: the few
// entry points and types of its C API (v2.x) are declared below from its
// public reference, so nothing of it is needed to build, and a binary runs
// where it is absent.
//
// The buffers stay dml's (NCHW activations, OIHW weights, row-major). Each
// convolution shape and direction gets oneDNN's primitive for the memory
// formats it prefers (format "any": blocked layouts such as nChw16c on
// AVX-512), and reorders from and to dml's layouts around it. Measured on
// a 2-core Intel Xeon with AVX-512, one thread, ResNet-20's 16-channel 3×3
// layer at batch 64: 2.1 ms forward in the blocked layout against 7.4 in
// plain NCHW, and 0.3 ms for each 4 MiB reorder.
package onednn

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The C API's types, as opaque storage of their sizes in oneDNN 2.6
// (dnnl_memory_desc_t 696 bytes, dnnl_convolution_desc_t 5976), with room
// to spare; dnnl_dims_t is int64_t[12].
typedef struct { long long b[96]; } dml_md;
typedef struct { long long b[800]; } dml_cd;
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
static int (*p_conv_fwd)(dml_cd *, int, int, const dml_md *, const dml_md *, const dml_md *, const dml_md *,
	const long long *, const long long *, const long long *);
static int (*p_conv_bwd_data)(dml_cd *, int, const dml_md *, const dml_md *, const dml_md *,
	const long long *, const long long *, const long long *);
static int (*p_conv_bwd_w)(dml_cd *, int, const dml_md *, const dml_md *, const dml_md *, const dml_md *,
	const long long *, const long long *, const long long *);
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
	SYM(p_conv_fwd, "dnnl_convolution_forward_desc_init");
	SYM(p_conv_bwd_data, "dnnl_convolution_backward_data_desc_init");
	SYM(p_conv_bwd_w, "dnnl_convolution_backward_weights_desc_init");
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
	return 0;
}

static void dml_dnnl_version(int *a, int *b, int *c) {
	const dml_version_t *v = p_version();
	*a = v->major; *b = v->minor; *c = v->patch;
}

// Constants of the C API (dnnl_types.h, v2.x).
enum {
	DML_CPU = 1, DML_STREAM_DEFAULT = 1, DML_F32 = 3,
	DML_ANY = 1, DML_X = 2, DML_NCHW = 5, DML_OIHW = 5,
	DML_FWD_TRAINING = 64, DML_CONV_DIRECT = 1,
	DML_ARG_SRC = 1, DML_ARG_DST = 17, DML_ARG_WEIGHTS = 33, DML_ARG_BIAS = 41,
	DML_ARG_DIFF_SRC = 129, DML_ARG_DIFF_DST = 145, DML_ARG_DIFF_WEIGHTS = 161, DML_ARG_DIFF_BIAS = 169,
	DML_Q_SRC = 129, DML_Q_DIFF_SRC = 130, DML_Q_WEIGHTS = 131, DML_Q_DIFF_WEIGHTS = 132,
	DML_Q_DST = 133, DML_Q_DIFF_DST = 134,
};
#define DML_ALLOCATE ((void *)(size_t)-1)

// A tensor's two layouts: dml's (user, plain) and the primitive's, with a
// reorder between them when they differ (in: user to primitive; out: the
// other way).
typedef struct {
	void *user, *prim;   // memory objects; prim == user when no reorder
	void *reorder;       // primitive, or NULL
} dml_tensor;

// A convolution shape's primitives.
typedef struct {
	void *eng, *stream;
	void *fwd_pd, *bwd_data_pd, *bwd_w_pd;
	void *fwd, *bwd_data, *bwd_w;
	dml_tensor f_src, f_w, f_dst, d_ddst, d_w, d_dsrc, w_src, w_ddst, w_dw;
	void *f_bias, *w_dbias;
} dml_conv;

static int dml_tensor_make(dml_tensor *t, const dml_md *user_md, const dml_md *prim_md, void *eng, int in) {
	int st;
	if ((st = p_mem_create(&t->user, user_md, eng, NULL)) != 0) return st;
	if (p_md_equal(user_md, prim_md)) { t->prim = t->user; t->reorder = NULL; return 0; }
	if ((st = p_mem_create(&t->prim, prim_md, eng, DML_ALLOCATE)) != 0) return st;
	void *pd;
	if (in) st = p_reorder_pd(&pd, user_md, eng, prim_md, eng, NULL);
	else st = p_reorder_pd(&pd, prim_md, eng, user_md, eng, NULL);
	if (st != 0) return st;
	st = p_prim_create(&t->reorder, pd);
	p_pd_destroy(pd);
	return st;
}

static void dml_tensor_free(dml_tensor *t) {
	if (t->reorder) p_prim_destroy(t->reorder);
	if (t->prim && t->prim != t->user) p_mem_destroy(t->prim);
	if (t->user) p_mem_destroy(t->user);
	memset(t, 0, sizeof *t);
}

// dml_reorder runs t's reorder (in: user to primitive, else back).
static int dml_reorder(dml_tensor *t, void *stream, int in) {
	if (!t->reorder) return 0;
	dml_arg a[2] = {{DML_ARG_SRC, in ? t->user : t->prim}, {DML_ARG_DST, in ? t->prim : t->user}};
	return p_prim_exec(t->reorder, stream, 2, a);
}

// dml_conv_make builds the forward primitive of a shape and, when want_bwd,
// the two backward ones (which take it as their hint). It returns 0 or the
// first failing call's status, with its stage in *stage.
static int dml_conv_make(dml_conv *c, long long n, long long ch, long long h, long long w, long long o,
		long long k, long long stride, long long pad, long long oh, long long ow, int bias, int *stage) {
	int st;
	dml_dims xd = {n, ch, h, w}, wd = {o, ch, k, k}, yd = {n, o, oh, ow}, bd = {o};
	dml_dims strides = {stride, stride}, pads = {pad, pad};
	dml_md x_user, w_user, y_user, b_md, x_any, w_any, y_any;
	*stage = 0;
	if ((st = p_engine_create(&c->eng, DML_CPU, 0)) != 0) return st;
	if ((st = p_stream_create(&c->stream, c->eng, DML_STREAM_DEFAULT)) != 0) return st;
	*stage = 1;
	if ((st = p_md_init(&x_user, 4, xd, DML_F32, DML_NCHW)) != 0) return st;
	if ((st = p_md_init(&w_user, 4, wd, DML_F32, DML_OIHW)) != 0) return st;
	if ((st = p_md_init(&y_user, 4, yd, DML_F32, DML_NCHW)) != 0) return st;
	if ((st = p_md_init(&b_md, 1, bd, DML_F32, DML_X)) != 0) return st;
	if ((st = p_md_init(&x_any, 4, xd, DML_F32, DML_ANY)) != 0) return st;
	if ((st = p_md_init(&w_any, 4, wd, DML_F32, DML_ANY)) != 0) return st;
	if ((st = p_md_init(&y_any, 4, yd, DML_F32, DML_ANY)) != 0) return st;
	dml_cd *cd = malloc(sizeof(dml_cd));
	if (!cd) return -2;
	*stage = 2;
	st = p_conv_fwd(cd, DML_FWD_TRAINING, DML_CONV_DIRECT, &x_any, &w_any, bias ? &b_md : NULL, &y_any, strides, pads, pads);
	if (st == 0) st = p_pd_create(&c->fwd_pd, cd, NULL, c->eng, NULL);
	if (st == 0) st = p_prim_create(&c->fwd, c->fwd_pd);
	if (st == 0) st = dml_tensor_make(&c->f_src, &x_user, p_pd_query_md(c->fwd_pd, DML_Q_SRC, 0), c->eng, 1);
	if (st == 0) st = dml_tensor_make(&c->f_w, &w_user, p_pd_query_md(c->fwd_pd, DML_Q_WEIGHTS, 0), c->eng, 1);
	if (st == 0) st = dml_tensor_make(&c->f_dst, &y_user, p_pd_query_md(c->fwd_pd, DML_Q_DST, 0), c->eng, 0);
	if (st == 0 && bias) st = p_mem_create(&c->f_bias, &b_md, c->eng, NULL);
	if (st != 0) { free(cd); return st; }
	*stage = 3;
	st = p_conv_bwd_data(cd, DML_CONV_DIRECT, &x_any, &w_any, &y_any, strides, pads, pads);
	if (st == 0) st = p_pd_create(&c->bwd_data_pd, cd, NULL, c->eng, c->fwd_pd);
	if (st == 0) st = p_prim_create(&c->bwd_data, c->bwd_data_pd);
	if (st == 0) st = dml_tensor_make(&c->d_ddst, &y_user, p_pd_query_md(c->bwd_data_pd, DML_Q_DIFF_DST, 0), c->eng, 1);
	if (st == 0) st = dml_tensor_make(&c->d_w, &w_user, p_pd_query_md(c->bwd_data_pd, DML_Q_WEIGHTS, 0), c->eng, 1);
	if (st == 0) st = dml_tensor_make(&c->d_dsrc, &x_user, p_pd_query_md(c->bwd_data_pd, DML_Q_DIFF_SRC, 0), c->eng, 0);
	if (st != 0) { free(cd); return st; }
	*stage = 4;
	st = p_conv_bwd_w(cd, DML_CONV_DIRECT, &x_any, &w_any, bias ? &b_md : NULL, &y_any, strides, pads, pads);
	if (st == 0) st = p_pd_create(&c->bwd_w_pd, cd, NULL, c->eng, c->fwd_pd);
	if (st == 0) st = p_prim_create(&c->bwd_w, c->bwd_w_pd);
	if (st == 0) st = dml_tensor_make(&c->w_src, &x_user, p_pd_query_md(c->bwd_w_pd, DML_Q_SRC, 0), c->eng, 1);
	if (st == 0) st = dml_tensor_make(&c->w_ddst, &y_user, p_pd_query_md(c->bwd_w_pd, DML_Q_DIFF_DST, 0), c->eng, 1);
	if (st == 0) st = dml_tensor_make(&c->w_dw, &w_user, p_pd_query_md(c->bwd_w_pd, DML_Q_DIFF_WEIGHTS, 0), c->eng, 0);
	if (st == 0 && bias) st = p_mem_create(&c->w_dbias, &b_md, c->eng, NULL);
	free(cd);
	return st;
}

static void dml_conv_free(dml_conv *c) {
	dml_tensor *ts[] = {&c->f_src, &c->f_w, &c->f_dst, &c->d_ddst, &c->d_w, &c->d_dsrc, &c->w_src, &c->w_ddst, &c->w_dw};
	for (int i = 0; i < 9; i++) dml_tensor_free(ts[i]);
	if (c->f_bias) p_mem_destroy(c->f_bias);
	if (c->w_dbias) p_mem_destroy(c->w_dbias);
	void *prims[] = {c->fwd, c->bwd_data, c->bwd_w};
	for (int i = 0; i < 3; i++) if (prims[i]) p_prim_destroy(prims[i]);
	void *pds[] = {c->fwd_pd, c->bwd_data_pd, c->bwd_w_pd};
	for (int i = 0; i < 3; i++) if (pds[i]) p_pd_destroy(pds[i]);
	if (c->stream) p_stream_destroy(c->stream);
	if (c->eng) p_engine_destroy(c->eng);
	memset(c, 0, sizeof *c);
}

// The three runs. The user buffers are dml's, set as the memory objects'
// handles for the call only (C keeps no Go pointer after it returns).
static int dml_conv_forward(dml_conv *c, float *y, float *x, float *w, float *bias) {
	int st;
	p_mem_set(c->f_src.user, x); p_mem_set(c->f_w.user, w); p_mem_set(c->f_dst.user, y);
	if (bias) p_mem_set(c->f_bias, bias);
	if ((st = dml_reorder(&c->f_src, c->stream, 1)) == 0 && (st = dml_reorder(&c->f_w, c->stream, 1)) == 0) {
		dml_arg a[4] = {{DML_ARG_SRC, c->f_src.prim}, {DML_ARG_WEIGHTS, c->f_w.prim}, {DML_ARG_DST, c->f_dst.prim}, {DML_ARG_BIAS, c->f_bias}};
		if ((st = p_prim_exec(c->fwd, c->stream, bias ? 4 : 3, a)) == 0) st = dml_reorder(&c->f_dst, c->stream, 0);
	}
	if (st == 0) st = p_stream_wait(c->stream);
	p_mem_set(c->f_src.user, NULL); p_mem_set(c->f_w.user, NULL); p_mem_set(c->f_dst.user, NULL);
	if (c->f_bias) p_mem_set(c->f_bias, NULL);
	return st;
}

static int dml_conv_backward_data(dml_conv *c, float *dx, float *dy, float *w) {
	int st;
	p_mem_set(c->d_ddst.user, dy); p_mem_set(c->d_w.user, w); p_mem_set(c->d_dsrc.user, dx);
	if ((st = dml_reorder(&c->d_ddst, c->stream, 1)) == 0 && (st = dml_reorder(&c->d_w, c->stream, 1)) == 0) {
		dml_arg a[3] = {{DML_ARG_DIFF_DST, c->d_ddst.prim}, {DML_ARG_WEIGHTS, c->d_w.prim}, {DML_ARG_DIFF_SRC, c->d_dsrc.prim}};
		if ((st = p_prim_exec(c->bwd_data, c->stream, 3, a)) == 0) st = dml_reorder(&c->d_dsrc, c->stream, 0);
	}
	if (st == 0) st = p_stream_wait(c->stream);
	p_mem_set(c->d_ddst.user, NULL); p_mem_set(c->d_w.user, NULL); p_mem_set(c->d_dsrc.user, NULL);
	return st;
}

static int dml_conv_backward_weights(dml_conv *c, float *dw, float *db, float *x, float *dy) {
	int st;
	p_mem_set(c->w_src.user, x); p_mem_set(c->w_ddst.user, dy); p_mem_set(c->w_dw.user, dw);
	if (db) p_mem_set(c->w_dbias, db);
	if ((st = dml_reorder(&c->w_src, c->stream, 1)) == 0 && (st = dml_reorder(&c->w_ddst, c->stream, 1)) == 0) {
		dml_arg a[4] = {{DML_ARG_SRC, c->w_src.prim}, {DML_ARG_DIFF_DST, c->w_ddst.prim}, {DML_ARG_DIFF_WEIGHTS, c->w_dw.prim}, {DML_ARG_DIFF_BIAS, c->w_dbias}};
		if ((st = p_prim_exec(c->bwd_w, c->stream, db ? 4 : 3, a)) == 0) st = dml_reorder(&c->w_dw, c->stream, 0);
	}
	if (st == 0) st = p_stream_wait(c->stream);
	p_mem_set(c->w_src.user, NULL); p_mem_set(c->w_ddst.user, NULL); p_mem_set(c->w_dw.user, NULL);
	if (c->w_dbias) p_mem_set(c->w_dbias, NULL);
	return st;
}
*/
import "C"

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"unsafe"
)

// Soname is the library this package opens: oneDNN 2 (the C API used here
// is 2.x's; oneDNN 3 changed it).
const Soname = "libdnnl.so.2"

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
		if _, set := os.LookupEnv("OMP_NUM_THREADS"); !set {
			os.Setenv("OMP_NUM_THREADS", strconv.Itoa(max(threads, 1)))
		}
		path := C.CString(Soname)
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

// Shape is a convolution's dimensions (PyTorch's layouts).
type Shape struct{ N, C, H, W, O, K, Stride, Pad int }

// Conv runs convolutions on oneDNN, one set of primitives per shape
// (made on first use and kept). Like a kernels.Backend it is used by one
// goroutine at a time.
type Conv struct {
	plans map[planKey]*C.dml_conv
}

type planKey struct {
	Shape
	bias bool
}

// New returns a Conv; Load must have succeeded.
func New() *Conv { return &Conv{plans: map[planKey]*C.dml_conv{}} }

// Close releases every shape's primitives.
func (c *Conv) Close() {
	for k, p := range c.plans {
		C.dml_conv_free(p)
		C.free(unsafe.Pointer(p))
		delete(c.plans, k)
	}
}

func (c *Conv) plan(s Shape, bias bool) (*C.dml_conv, error) {
	key := planKey{s, bias}
	if p := c.plans[key]; p != nil {
		return p, nil
	}
	oh, ow := (s.H+2*s.Pad-s.K)/s.Stride+1, (s.W+2*s.Pad-s.K)/s.Stride+1
	p := (*C.dml_conv)(C.calloc(1, C.size_t(unsafe.Sizeof(C.dml_conv{}))))
	var stage C.int
	b := C.int(0)
	if bias {
		b = 1
	}
	if st := C.dml_conv_make(p, C.longlong(s.N), C.longlong(s.C), C.longlong(s.H), C.longlong(s.W), C.longlong(s.O),
		C.longlong(s.K), C.longlong(s.Stride), C.longlong(s.Pad), C.longlong(oh), C.longlong(ow), b, &stage); st != 0 {
		C.dml_conv_free(p)
		C.free(unsafe.Pointer(p))
		what := [...]string{"the engine", "a memory descriptor", "the forward primitive", "the data-gradient primitive", "the filter-gradient primitive"}[stage]
		return nil, fmt.Errorf("onednn: %+v: creating %s: status %d", s, what, int(st))
	}
	c.plans[key] = p
	return p, nil
}

func ptr(x []float32) *C.float {
	if len(x) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(&x[0]))
}

// Forward sets y = x ⋆ w (+ bias when not nil). The lengths are the
// caller's to check.
func (c *Conv) Forward(y, x, w, bias []float32, s Shape) error {
	p, err := c.plan(s, bias != nil)
	if err != nil {
		return err
	}
	if st := C.dml_conv_forward(p, ptr(y), ptr(x), ptr(w), ptr(bias)); st != 0 {
		return fmt.Errorf("onednn: %+v: forward: status %d", s, int(st))
	}
	return nil
}

// BackwardData sets dx to the gradient of the convolution's input.
func (c *Conv) BackwardData(dx, dy, w []float32, s Shape) error {
	bias := c.plans[planKey{s, true}] != nil // either shape's plan serves
	p, err := c.plan(s, bias)
	if err != nil {
		return err
	}
	if st := C.dml_conv_backward_data(p, ptr(dx), ptr(dy), ptr(w)); st != 0 {
		return fmt.Errorf("onednn: %+v: data gradient: status %d", s, int(st))
	}
	return nil
}

// BackwardFilter sets dw (and db when not nil) to the gradients of the
// weights (and the bias).
func (c *Conv) BackwardFilter(dw, db, x, dy []float32, s Shape) error {
	p, err := c.plan(s, db != nil)
	if err != nil {
		return err
	}
	if st := C.dml_conv_backward_weights(p, ptr(dw), ptr(db), ptr(x), ptr(dy)); st != 0 {
		return fmt.Errorf("onednn: %+v: filter gradient: status %d", s, int(st))
	}
	return nil
}
