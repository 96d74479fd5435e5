//go:build cuda

package cuda

// The CUDA driver API, loaded at run time with dlopen("libcuda.so.1").
//
// The binary does not link libcuda: it starts, and every other backend
// works, on a machine without the driver; opening this backend there
// returns "no CUDA device: libcuda.so.1: cannot open shared object file".
// cuda.h (from Debian's nvidia-cuda-dev, fetched by `make cuda-toolchain`)
// supplies the types and constants only. gorgonia.org/cu v0.9.6 could not
// be used for this: its package init calls cuInit and os.Exit(1)s when that
// fails, which would end every command (and every test, before it can
// skip) of a binary built with the tag on a machine without a GPU; it also
// has no pinned host allocation, and mallocs twice per launch.
//
// A CUDA context is current per OS thread while goroutines move between
// threads, so every wrapper below makes the backend's context current first
// (a thread-local cache keeps that to a compare when it already is).

/*
#cgo LDFLAGS: -ldl
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

static CUresult (*p_cuInit)(unsigned int);
static CUresult (*p_cuDriverGetVersion)(int*);
static CUresult (*p_cuDeviceGetCount)(int*);
static CUresult (*p_cuDeviceGet)(CUdevice*, int);
static CUresult (*p_cuDeviceGetName)(char*, int, CUdevice);
static CUresult (*p_cuDeviceTotalMem)(size_t*, CUdevice);
static CUresult (*p_cuDeviceGetAttribute)(int*, CUdevice_attribute, CUdevice);
static CUresult (*p_cuDeviceGetPCIBusId)(char*, int, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
static CUresult (*p_cuCtxSetCurrent)(CUcontext);
static CUresult (*p_cuCtxSynchronize)(void);
static CUresult (*p_cuCtxGetDevice)(CUdevice*);
static CUresult (*p_cuMemGetInfo)(size_t*, size_t*);
static CUresult (*p_cuStreamCreate)(CUstream*, unsigned int);
static CUresult (*p_cuStreamDestroy)(CUstream);
static CUresult (*p_cuStreamSynchronize)(CUstream);
static CUresult (*p_cuMemAlloc)(CUdeviceptr*, size_t);
static CUresult (*p_cuMemFree)(CUdeviceptr);
static CUresult (*p_cuMemHostAlloc)(void**, size_t, unsigned int);
static CUresult (*p_cuMemFreeHost)(void*);
static CUresult (*p_cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
static CUresult (*p_cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);
static CUresult (*p_cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
static CUresult (*p_cuMemsetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);
static CUresult (*p_cuModuleLoadDataEx)(CUmodule*, const void*, unsigned int, CUjit_option*, void**);
static CUresult (*p_cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
static CUresult (*p_cuLaunchKernel)(CUfunction, unsigned int, unsigned int, unsigned int,
	unsigned int, unsigned int, unsigned int, unsigned int, CUstream, void**, void**);
static CUresult (*p_cuEventCreate)(CUevent*, unsigned int);
static CUresult (*p_cuEventDestroy)(CUevent);
static CUresult (*p_cuEventRecord)(CUevent, CUstream);
static CUresult (*p_cuEventSynchronize)(CUevent);
static CUresult (*p_cuEventQuery)(CUevent);
static CUresult (*p_cuStreamWaitEvent)(CUstream, CUevent, unsigned int);
static CUresult (*p_cuEventElapsedTime)(float*, CUevent, CUevent);
static CUresult (*p_cuGetErrorName)(CUresult, const char**);
static CUresult (*p_cuGetErrorString)(CUresult, const char**);
// Graphs (optional: a driver without them runs every step op by op).
static CUresult (*p_cuStreamBeginCapture)(CUstream, CUstreamCaptureMode);
static CUresult (*p_cuStreamEndCapture)(CUstream, CUgraph*);
static CUresult (*p_cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long);
static CUresult (*p_cuGraphLaunch)(CUgraphExec, CUstream);
static CUresult (*p_cuGraphExecDestroy)(CUgraphExec);
static CUresult (*p_cuGraphDestroy)(CUgraph);
// The profiler's range (optional: Nsight Compute run with
// --profile-from-start off records only what lies between the two).
static CUresult (*p_cuProfilerStart)(void);
static CUresult (*p_cuProfilerStop)(void);

// dml_cu_load opens libcuda.so.1, resolves every entry point and calls
// cuInit. It returns 0, or writes why not into msg and returns -1 (no
// library, a missing symbol) or the CUresult of cuInit.
static int dml_cu_load(char *msg, int n) {
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!h) {
		snprintf(msg, n, "%s", dlerror());
		return -1;
	}
#define SYM(var, name) do { \
		*(void**)(&var) = dlsym(h, name); \
		if (!var) { snprintf(msg, n, "libcuda.so.1 has no %s", name); return -1; } \
	} while (0)
	SYM(p_cuInit, "cuInit");
	SYM(p_cuDriverGetVersion, "cuDriverGetVersion");
	SYM(p_cuDeviceGetCount, "cuDeviceGetCount");
	SYM(p_cuDeviceGet, "cuDeviceGet");
	SYM(p_cuDeviceGetName, "cuDeviceGetName");
	SYM(p_cuDeviceTotalMem, "cuDeviceTotalMem_v2");
	SYM(p_cuDeviceGetAttribute, "cuDeviceGetAttribute");
	SYM(p_cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId");
	SYM(p_cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	SYM(p_cuCtxSetCurrent, "cuCtxSetCurrent");
	SYM(p_cuCtxSynchronize, "cuCtxSynchronize");
	SYM(p_cuCtxGetDevice, "cuCtxGetDevice");
	SYM(p_cuMemGetInfo, "cuMemGetInfo_v2");
	SYM(p_cuStreamCreate, "cuStreamCreate");
	SYM(p_cuStreamDestroy, "cuStreamDestroy_v2");
	SYM(p_cuStreamSynchronize, "cuStreamSynchronize");
	SYM(p_cuMemAlloc, "cuMemAlloc_v2");
	SYM(p_cuMemFree, "cuMemFree_v2");
	SYM(p_cuMemHostAlloc, "cuMemHostAlloc");
	SYM(p_cuMemFreeHost, "cuMemFreeHost");
	SYM(p_cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
	SYM(p_cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
	SYM(p_cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
	SYM(p_cuMemsetD32Async, "cuMemsetD32Async");
	SYM(p_cuModuleLoadDataEx, "cuModuleLoadDataEx");
	SYM(p_cuModuleGetFunction, "cuModuleGetFunction");
	SYM(p_cuLaunchKernel, "cuLaunchKernel");
	SYM(p_cuEventCreate, "cuEventCreate");
	SYM(p_cuEventDestroy, "cuEventDestroy_v2");
	SYM(p_cuEventRecord, "cuEventRecord");
	SYM(p_cuEventSynchronize, "cuEventSynchronize");
	SYM(p_cuEventQuery, "cuEventQuery");
	SYM(p_cuStreamWaitEvent, "cuStreamWaitEvent");
	SYM(p_cuEventElapsedTime, "cuEventElapsedTime");
	SYM(p_cuGetErrorName, "cuGetErrorName");
	SYM(p_cuGetErrorString, "cuGetErrorString");
#undef SYM
	*(void**)(&p_cuStreamBeginCapture) = dlsym(h, "cuStreamBeginCapture_v2");
	*(void**)(&p_cuStreamEndCapture) = dlsym(h, "cuStreamEndCapture");
	*(void**)(&p_cuGraphInstantiateWithFlags) = dlsym(h, "cuGraphInstantiateWithFlags");
	*(void**)(&p_cuGraphLaunch) = dlsym(h, "cuGraphLaunch");
	*(void**)(&p_cuGraphExecDestroy) = dlsym(h, "cuGraphExecDestroy");
	*(void**)(&p_cuGraphDestroy) = dlsym(h, "cuGraphDestroy");
	*(void**)(&p_cuProfilerStart) = dlsym(h, "cuProfilerStart");
	*(void**)(&p_cuProfilerStop) = dlsym(h, "cuProfilerStop");
	CUresult r = p_cuInit(0);
	if (r != CUDA_SUCCESS) {
		const char *name = 0, *str = 0;
		if (p_cuGetErrorName(r, &name) == CUDA_SUCCESS && p_cuGetErrorString(r, &str) == CUDA_SUCCESS && name && str) {
			snprintf(msg, n, "cuInit: %s (%s)", str, name);
		} else if (r == 34) {
			snprintf(msg, n, "cuInit: error 34 (CUDA_ERROR_STUB_LIBRARY: libcuda.so.1 is the toolkit's stub, not a driver)");
		} else {
			snprintf(msg, n, "cuInit: error %d", (int)r);
		}
		return (int)r;
	}
	return 0;
}

static const char *dml_cu_error_name(CUresult r) {
	const char *s = 0;
	if (!p_cuGetErrorName || p_cuGetErrorName(r, &s) != CUDA_SUCCESS || !s) return "CUDA_ERROR_UNKNOWN_CODE";
	return s;
}

static const char *dml_cu_error_string(CUresult r) {
	const char *s = 0;
	if (!p_cuGetErrorString || p_cuGetErrorString(r, &s) != CUDA_SUCCESS || !s) return "unknown error";
	return s;
}

static __thread CUcontext dml_current;

// dml_bind makes ctx current on the calling thread (not static: libs.go
// binds before each library call too).
CUresult dml_bind(CUcontext ctx) {
	if (dml_current == ctx) return CUDA_SUCCESS;
	CUresult r = p_cuCtxSetCurrent(ctx);
	if (r == CUDA_SUCCESS) dml_current = ctx;
	return r;
}

#define BIND(ctx) do { CUresult _r = dml_bind(ctx); if (_r != CUDA_SUCCESS) return _r; } while (0)

static CUresult dml_driver_version(int *v) { return p_cuDriverGetVersion(v); }
static CUresult dml_device_count(int *n) { return p_cuDeviceGetCount(n); }

static CUresult dml_device_info(int ordinal, char *name, int nameLen, char *bus, int busLen,
		size_t *mem, int *major, int *minor, int *sms) {
	CUdevice d;
	CUresult r;
	if ((r = p_cuDeviceGet(&d, ordinal)) != CUDA_SUCCESS) return r;
	if ((r = p_cuDeviceGetName(name, nameLen, d)) != CUDA_SUCCESS) return r;
	if ((r = p_cuDeviceGetPCIBusId(bus, busLen, d)) != CUDA_SUCCESS) return r;
	if ((r = p_cuDeviceTotalMem(mem, d)) != CUDA_SUCCESS) return r;
	if ((r = p_cuDeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d)) != CUDA_SUCCESS) return r;
	if ((r = p_cuDeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d)) != CUDA_SUCCESS) return r;
	return p_cuDeviceGetAttribute(sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d);
}

static CUresult dml_primary_ctx(int ordinal, CUcontext *ctx) {
	CUdevice d;
	CUresult r;
	if ((r = p_cuDeviceGet(&d, ordinal)) != CUDA_SUCCESS) return r;
	return p_cuDevicePrimaryCtxRetain(ctx, d);
}

static CUresult dml_mem_info(CUcontext c, size_t *free, size_t *total) { BIND(c); return p_cuMemGetInfo(free, total); }
static CUresult dml_stream_create(CUcontext c, CUstream *s) { BIND(c); return p_cuStreamCreate(s, CU_STREAM_NON_BLOCKING); }
static CUresult dml_stream_destroy(CUcontext c, CUstream s) { BIND(c); return p_cuStreamDestroy(s); }
static CUresult dml_stream_sync(CUcontext c, CUstream s) { BIND(c); return p_cuStreamSynchronize(s); }
static CUresult dml_mem_alloc(CUcontext c, CUdeviceptr *p, size_t n) { BIND(c); return p_cuMemAlloc(p, n); }
static CUresult dml_mem_free(CUcontext c, CUdeviceptr p) { BIND(c); return p_cuMemFree(p); }
static CUresult dml_host_alloc(CUcontext c, void **p, size_t n) { BIND(c); return p_cuMemHostAlloc(p, n, CU_MEMHOSTALLOC_PORTABLE); }
static CUresult dml_host_free(CUcontext c, void *p) { BIND(c); return p_cuMemFreeHost(p); }
static CUresult dml_htod(CUcontext c, CUdeviceptr dst, const void *src, size_t n, CUstream s) { BIND(c); return p_cuMemcpyHtoDAsync(dst, src, n, s); }
static CUresult dml_dtoh(CUcontext c, void *dst, CUdeviceptr src, size_t n, CUstream s) { BIND(c); return p_cuMemcpyDtoHAsync(dst, src, n, s); }
static CUresult dml_dtod(CUcontext c, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) { BIND(c); return p_cuMemcpyDtoDAsync(dst, src, n, s); }
static CUresult dml_memset32(CUcontext c, CUdeviceptr dst, unsigned int v, size_t n, CUstream s) { BIND(c); return p_cuMemsetD32Async(dst, v, n, s); }
static CUresult dml_event_create(CUcontext c, CUevent *e, int timing) {
	BIND(c);
	return p_cuEventCreate(e, timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING);
}
static CUresult dml_event_destroy(CUcontext c, CUevent e) { BIND(c); return p_cuEventDestroy(e); }
static CUresult dml_event_record(CUcontext c, CUevent e, CUstream s) { BIND(c); return p_cuEventRecord(e, s); }
static CUresult dml_event_sync(CUcontext c, CUevent e) { BIND(c); return p_cuEventSynchronize(e); }
static CUresult dml_event_query(CUcontext c, CUevent e) { BIND(c); return p_cuEventQuery(e); }
static CUresult dml_stream_wait_event(CUcontext c, CUstream s, CUevent e) { BIND(c); return p_cuStreamWaitEvent(s, e, 0); }
static CUresult dml_event_elapsed(CUcontext c, float *ms, CUevent a, CUevent b) { BIND(c); return p_cuEventElapsedTime(ms, a, b); }

// dml_module_load JIT-compiles a PTX image, leaving the JIT's error log in log.
static CUresult dml_module_load(CUcontext c, CUmodule *m, const char *image, char *log, int logLen) {
	BIND(c);
	CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *vals[2] = {log, (void*)(size_t)logLen};
	return p_cuModuleLoadDataEx(m, image, 2, opts, vals);
}

// dml_module_load_cubin loads machine code (a cubin: binary, with NUL
// bytes, read by the driver from its ELF header's sizes).
static CUresult dml_module_load_cubin(CUcontext c, CUmodule *m, const void *image) {
	BIND(c);
	return p_cuModuleLoadDataEx(m, image, 0, NULL, NULL);
}

// dml_ctx_cc reports the compute capability of the context's device.
static CUresult dml_ctx_cc(CUcontext c, int *major, int *minor) {
	BIND(c);
	CUdevice d;
	CUresult r;
	if ((r = p_cuCtxGetDevice(&d)) != CUDA_SUCCESS) return r;
	if ((r = p_cuDeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d)) != CUDA_SUCCESS) return r;
	return p_cuDeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d);
}

static CUresult dml_module_function(CUcontext c, CUfunction *f, CUmodule m, const char *name) {
	BIND(c);
	return p_cuModuleGetFunction(f, m, name);
}

static int dml_has_graphs(void) {
	return p_cuStreamBeginCapture && p_cuStreamEndCapture && p_cuGraphInstantiateWithFlags &&
		p_cuGraphLaunch && p_cuGraphExecDestroy && p_cuGraphDestroy;
}

// dml_capture_begin starts recording what is queued on s (relaxed mode:
// other threads' calls are not checked, and a Go goroutine may change
// threads during the capture).
static CUresult dml_capture_begin(CUcontext c, CUstream s) {
	BIND(c);
	return p_cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
}

// dml_capture_end stops recording and instantiates the graph (the graph
// itself is freed once instantiated).
static CUresult dml_capture_end(CUcontext c, CUstream s, CUgraphExec *exec, int keep) {
	CUgraph g = 0;
	CUresult r;
	BIND(c);
	r = p_cuStreamEndCapture(s, &g);
	if (r != CUDA_SUCCESS || !keep) {
		if (g) p_cuGraphDestroy(g);
		return r;
	}
	r = p_cuGraphInstantiateWithFlags(exec, g, 0);
	p_cuGraphDestroy(g);
	return r;
}

static CUresult dml_graph_launch(CUcontext c, CUgraphExec e, CUstream s) { BIND(c); return p_cuGraphLaunch(e, s); }
static CUresult dml_graph_free(CUcontext c, CUgraphExec e) { BIND(c); return p_cuGraphExecDestroy(e); }

// dml_profiler starts (on) or stops the profiler's range; a driver
// without the entry points does nothing.
static CUresult dml_profiler(CUcontext c, int on) {
	CUresult (*f)(void) = on ? p_cuProfilerStart : p_cuProfilerStop;
	BIND(c);
	return f ? f() : CUDA_SUCCESS;
}

// dml_launch launches f with n arguments, each held in an 8-byte slot of
// args (a float in the low half of its slot): the kernel reads as many
// bytes of each slot as its parameter has.
static CUresult dml_launch(CUcontext c, CUfunction f, unsigned int gx, unsigned int gy,
		unsigned int bx, CUstream s, unsigned long long *args, int n) {
	void *params[16];
	int i;
	BIND(c);
	if (n > 16) return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < n; i++) params[i] = &args[i];
	return p_cuLaunchKernel(f, gx, gy, 1, bx, 1, 1, 0, s, params, 0);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/dml-project/dml/kernels/ptx"
)

// errNoDevice is wrapped by every error that means "this machine cannot
// run the backend": no driver library, no GPU, a driver that refuses.
var errNoDevice = errors.New("no CUDA device")

// cuErr is a failed driver call.
type cuErr struct {
	call string
	code C.CUresult
}

func (e *cuErr) Error() string {
	return fmt.Sprintf("%s: %s (%s)", e.call, C.GoString(C.dml_cu_error_string(e.code)), C.GoString(C.dml_cu_error_name(e.code)))
}

// outOfMemory reports whether err is the driver's out-of-memory error.
func outOfMemory(err error) bool {
	var e *cuErr
	return errors.As(err, &e) && e.code == C.CUDA_ERROR_OUT_OF_MEMORY
}

// fatal reports whether err leaves the context unusable (a fault in a
// kernel, a lost device): every later call fails the same way.
func fatal(err error) bool {
	var e *cuErr
	if !errors.As(err, &e) {
		return false
	}
	c := int(e.code)
	return c >= 700 && c < 720 || c == C.CUDA_ERROR_ECC_UNCORRECTABLE || c == C.CUDA_ERROR_DEINITIALIZED || c == C.CUDA_ERROR_UNKNOWN
}

// check turns a CUresult into an error naming the call.
func check(call string, r C.CUresult) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	return &cuErr{call: call, code: r}
}

var driver struct {
	once sync.Once
	err  error
}

// loadDriver opens the driver library and initialises it, once per
// process. Its error wraps errNoDevice.
func loadDriver() error {
	driver.once.Do(func() {
		var msg [512]C.char
		if r := C.dml_cu_load(&msg[0], C.int(len(msg))); r != 0 {
			driver.err = fmt.Errorf("%w: %s", errNoDevice, C.GoString(&msg[0]))
			return
		}
		var n C.int
		if err := check("cuDeviceGetCount", C.dml_device_count(&n)); err != nil {
			driver.err = fmt.Errorf("%w: %v", errNoDevice, err)
			return
		}
		if n == 0 {
			driver.err = fmt.Errorf("%w: the driver sees no GPU", errNoDevice)
		}
	})
	return driver.err
}

// DriverVersion returns the driver's CUDA version as major*1000+minor*10
// (13000 for CUDA 13.0).
func DriverVersion() (int, error) {
	if err := loadDriver(); err != nil {
		return 0, err
	}
	var v C.int
	if err := check("cuDriverGetVersion", C.dml_driver_version(&v)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// Device describes one GPU as the driver reports it.
type Device struct {
	Ordinal      int    // the driver's index
	Name         string // e.g. "NVIDIA H200"
	PCIBusID     string
	TotalMemory  int64 // bytes
	Major, Minor int   // compute capability
	SMs          int   // multiprocessors
}

// Devices lists the GPUs this process sees (after CUDA_VISIBLE_DEVICES).
// Without a driver or a GPU the error wraps "no CUDA device".
func Devices() ([]Device, error) {
	if err := loadDriver(); err != nil {
		return nil, err
	}
	var n C.int
	if err := check("cuDeviceGetCount", C.dml_device_count(&n)); err != nil {
		return nil, err
	}
	devs := make([]Device, n)
	for i := range devs {
		var name, bus [256]C.char
		var mem C.size_t
		var major, minor, sms C.int
		if err := check("cuDeviceGet*", C.dml_device_info(C.int(i), &name[0], 256, &bus[0], 256, &mem, &major, &minor, &sms)); err != nil {
			return nil, fmt.Errorf("device %d: %w", i, err)
		}
		devs[i] = Device{Ordinal: i, Name: C.GoString(&name[0]), PCIBusID: C.GoString(&bus[0]),
			TotalMemory: int64(mem), Major: int(major), Minor: int(minor), SMs: int(sms)}
	}
	return devs, nil
}

// DeviceFor returns the device ordinal a rank with this local rank uses:
// localRank mod count.
func DeviceFor(localRank, count int) int {
	if count <= 0 {
		return -1
	}
	d := localRank % count
	if d < 0 {
		d += count
	}
	return d
}

// context is a device's primary context (one per device per process).
type context struct{ c C.CUcontext }

// module is a loaded PTX module; function is one of its kernels.
type (
	module   struct{ m C.CUmodule }
	function struct{ f C.CUfunction }
	event    struct{ e C.CUevent }
)

// primaryContext retains device ordinal's primary context. It stays for
// the life of the process: the backends on a device share it and its
// modules.
func primaryContext(ordinal int) (context, error) {
	var c C.CUcontext
	if err := check("cuDevicePrimaryCtxRetain", C.dml_primary_ctx(C.int(ordinal), &c)); err != nil {
		return context{}, err
	}
	return context{c}, nil
}

// memInfo returns the device's free and total memory in bytes.
func (c context) memInfo() (free, total int64, err error) {
	var f, t C.size_t
	err = check("cuMemGetInfo", C.dml_mem_info(c.c, &f, &t))
	return int64(f), int64(t), err
}

// loadModule loads a module from the embedded PTX text image. Where
// package ptx embeds machine code assembled from exactly this PTX for the
// context's device (sm_90 cubins, on compute capability 9.0 only), it loads
// that and skips the driver's JIT compilation (seconds per process); if
// there is none, or the driver refuses it, it JIT-compiles the PTX, and on
// failure the error carries the JIT's log. DML_CUDA_NO_CUBIN=1 in the
// environment forces the JIT (to check or time the PTX path).
func (c context) loadModule(image string) (module, error) {
	var major, minor C.int
	if os.Getenv("DML_CUDA_NO_CUBIN") == "" && C.dml_ctx_cc(c.c, &major, &minor) == C.CUDA_SUCCESS {
		if cubin := ptx.Cubin(image, int(major), int(minor)); len(cubin) > 0 {
			// C memory: the driver reads the image during the call, and cgo
			// forbids handing it Go memory it might retain.
			img := C.CBytes(cubin)
			var m C.CUmodule
			r := C.dml_module_load_cubin(c.c, &m, img)
			C.free(img)
			if r == C.CUDA_SUCCESS {
				return module{m}, nil
			}
		}
	}
	img := C.CString(image)
	defer C.free(unsafe.Pointer(img))
	var log [8192]C.char
	var m C.CUmodule
	if err := check("cuModuleLoadDataEx", C.dml_module_load(c.c, &m, img, &log[0], C.int(len(log)))); err != nil {
		if s := C.GoString(&log[0]); s != "" {
			return module{}, fmt.Errorf("%w: %s", err, s)
		}
		return module{}, err
	}
	return module{m}, nil
}

// function looks a kernel up by name; ok is false when the module has none.
func (c context) function(m module, name string) (f function, ok bool, err error) {
	n := C.CString(name)
	defer C.free(unsafe.Pointer(n))
	r := C.dml_module_function(c.c, &f.f, m.m, n)
	if r == C.CUDA_ERROR_NOT_FOUND {
		return function{}, false, nil
	}
	if err := check("cuModuleGetFunction("+name+")", r); err != nil {
		return function{}, false, err
	}
	return f, true, nil
}

// queue is a stream in a context: every transfer and launch of a backend
// goes through its one queue, in order.
type queue struct {
	ctx C.CUcontext
	s   C.CUstream
}

func (c context) newQueue() (queue, error) {
	q := queue{ctx: c.c}
	err := check("cuStreamCreate", C.dml_stream_create(c.c, &q.s))
	return q, err
}

func (q queue) destroy() error { return check("cuStreamDestroy", C.dml_stream_destroy(q.ctx, q.s)) }
func (q queue) sync() error    { return check("cuStreamSynchronize", C.dml_stream_sync(q.ctx, q.s)) }

func (q queue) alloc(bytes int) (devPtr, error) {
	var p C.CUdeviceptr
	err := check("cuMemAlloc", C.dml_mem_alloc(q.ctx, &p, C.size_t(bytes)))
	return devPtr(p), err
}

func (q queue) free(p devPtr) error {
	return check("cuMemFree", C.dml_mem_free(q.ctx, C.CUdeviceptr(p)))
}

// hostAlloc returns pinned (page-locked) host memory.
func (q queue) hostAlloc(bytes int) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	err := check("cuMemHostAlloc", C.dml_host_alloc(q.ctx, &p, C.size_t(bytes)))
	return p, err
}

func (q queue) hostFree(p unsafe.Pointer) error {
	return check("cuMemFreeHost", C.dml_host_free(q.ctx, p))
}

// htod queues a copy of bytes from host src (pinned, for the copy to be
// asynchronous) to device dst.
func (q queue) htod(dst devPtr, src unsafe.Pointer, bytes int) error {
	return check("cuMemcpyHtoDAsync", C.dml_htod(q.ctx, C.CUdeviceptr(dst), src, C.size_t(bytes), q.s))
}

// dtoh queues a copy of bytes from device src to host dst.
func (q queue) dtoh(dst unsafe.Pointer, src devPtr, bytes int) error {
	return check("cuMemcpyDtoHAsync", C.dml_dtoh(q.ctx, dst, C.CUdeviceptr(src), C.size_t(bytes), q.s))
}

func (q queue) dtod(dst, src devPtr, bytes int) error {
	return check("cuMemcpyDtoDAsync", C.dml_dtod(q.ctx, C.CUdeviceptr(dst), C.CUdeviceptr(src), C.size_t(bytes), q.s))
}

// memset32 queues setting n 4-byte words at dst to v.
func (q queue) memset32(dst devPtr, v uint32, n int) error {
	return check("cuMemsetD32Async", C.dml_memset32(q.ctx, C.CUdeviceptr(dst), C.uint(v), C.size_t(n), q.s))
}

func (q queue) newEvent(timing bool) (event, error) {
	var e C.CUevent
	t := C.int(0)
	if timing {
		t = 1
	}
	err := check("cuEventCreate", C.dml_event_create(q.ctx, &e, t))
	return event{e}, err
}

func (q queue) destroyEvent(e event) error {
	return check("cuEventDestroy", C.dml_event_destroy(q.ctx, e.e))
}
func (q queue) record(e event) error {
	return check("cuEventRecord", C.dml_event_record(q.ctx, e.e, q.s))
}
func (q queue) wait(e event) error { return check("cuEventSynchronize", C.dml_event_sync(q.ctx, e.e)) }

// after makes the work queued on q from now on wait until the work before
// e's latest record (on any queue of the context) is done, without the
// host waiting.
func (q queue) after(e event) error {
	return check("cuStreamWaitEvent", C.dml_stream_wait_event(q.ctx, q.s, e.e))
}

// done reports whether the work before e's record has finished.
func (q queue) done(e event) (bool, error) {
	r := C.dml_event_query(q.ctx, e.e)
	if r == C.CUDA_ERROR_NOT_READY {
		return false, nil
	}
	return r == C.CUDA_SUCCESS, check("cuEventQuery", r)
}

// elapsed returns the milliseconds between two recorded timing events.
func (q queue) elapsed(a, b event) (float64, error) {
	var ms C.float
	err := check("cuEventElapsedTime", C.dml_event_elapsed(q.ctx, &ms, a.e, b.e))
	return float64(ms), err
}

// graphExec is an instantiated CUDA graph.
type graphExec struct{ e C.CUgraphExec }

func hasGraphs() bool { return C.dml_has_graphs() != 0 }

// beginCapture makes q record what is queued on it instead of running it.
func (q queue) beginCapture() error {
	return check("cuStreamBeginCapture", C.dml_capture_begin(q.ctx, q.s))
}

// endCapture stops the recording and returns it, instantiated (keep
// false: discarded, after a failure inside the capture).
func (q queue) endCapture(keep bool) (graphExec, error) {
	var e C.CUgraphExec
	k := C.int(0)
	if keep {
		k = 1
	}
	err := check("cuStreamEndCapture/cuGraphInstantiate", C.dml_capture_end(q.ctx, q.s, &e, k))
	return graphExec{e}, err
}

func (q queue) launchGraph(g graphExec) error {
	return check("cuGraphLaunch", C.dml_graph_launch(q.ctx, g.e, q.s))
}

func (q queue) freeGraph(g graphExec) error {
	return check("cuGraphExecDestroy", C.dml_graph_free(q.ctx, g.e))
}

// profileRange opens (on) or closes the range a profiler started with
// --profile-from-start off records; without a profiler it does nothing.
func (q queue) profileRange(on bool) error {
	o := C.int(0)
	if on {
		o = 1
	}
	return check("cuProfilerStart/Stop", C.dml_profiler(q.ctx, o))
}

// launch queues f on a gx×gy grid of bx-thread blocks. Each of args is one
// kernel parameter in an 8-byte slot (see argF32); args must not hold more
// than 16.
func (q queue) launch(f function, gx, gy, bx int, args []uint64) error {
	return check("cuLaunchKernel", C.dml_launch(q.ctx, f.f, C.uint(gx), C.uint(gy), C.uint(bx), q.s,
		(*C.ulonglong)(unsafe.Pointer(&args[0])), C.int(len(args))))
}
