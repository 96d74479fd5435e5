//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

// useDirect selects the direct convolutions (direct_amd64.s): AVX2 and
// FMA3.
var useDirect = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// useZ selects the k×k kernels' AVX-512 forms (directz_amd64.s) where the
// CPU and the OS have AVX512F, DQ and VL: the same sums as the AVX2
// ones, bit for bit, on registers twice as wide. A variable, so that
// tests run both.
var useZ = zCPU

// zCPU is whether the CPU and the OS have what the AVX-512 kernels need:
// AVX512F, DQ (VBROADCASTF32X8, VINSERTF32X8) and VL (256-bit moves to
// Y16–Y31).
var zCPU = useDirect && cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512VL

//go:noescape
func conv3x3o4w16(y *float32, ystride int, x *float32, xrow, xplane int, w *float32, wtap, c int)

//go:noescape
func conv3x3o8w8(y *float32, ystride int, x *float32, xrow, xplane int, w *float32, wtap, c int)

//go:noescape
func conv3x3dw(acc *float32, dy *float32, dystride int, x *float32, xrow, h, w, n, dysample, xsample int)

//go:noescape
func convTapsDW(acc *float32, dy *float32, dystride int, x *float32, taps *int, npix, n, dysample, xsample int)

//go:noescape
func convTapsO4W24(y *float32, ystride int, x *float32, taps *int, ntaps int, w *float32, wtap int, bias *float32)

//go:noescape
func convTapsO4W48(y *float32, ystride int, x *float32, taps *int, ntaps int, w *float32, wtap int, bias *float32)

//go:noescape
func convTapsDW8(acc *float32, dy *float32, dystride int, x *float32, taps *int, groups, npix int)

//go:noescape
func convTapsO6W32(y *float32, ystride int, x *float32, taps *int, ntaps int, w *float32, wtap int, bias *float32)

//go:noescape
func convRow5DW6(acc *float32, dy *float32, dystride int, x *float32, rows *int, nrows, npix int)

//go:noescape
func convRow5DW8(acc *float32, dy *float32, dystride int, x *float32, rows *int, nrows, npix int)
