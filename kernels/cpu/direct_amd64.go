//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

// useDirect selects the direct convolutions (direct_amd64.s): AVX2 and
// FMA3.
var useDirect = cpu.X86.HasAVX2 && cpu.X86.HasFMA

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
