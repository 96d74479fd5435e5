//go:build !amd64 || purego

package cpu

// Without the assembly micro-kernels there is no direct convolution
// (ConvSupports is false: the model runs Im2col and GEMM).

var useDirect = false

var useZ, zCPU = false, false

func conv3x3o4w16(y *float32, ystride int, x *float32, xrow, xplane int, w *float32, wtap, c int) {
	panic("cpu: no direct convolution on this platform")
}

func conv3x3o8w8(y *float32, ystride int, x *float32, xrow, xplane int, w *float32, wtap, c int) {
	panic("cpu: no direct convolution on this platform")
}

func conv3x3dw(acc *float32, dy *float32, dystride int, x *float32, xrow, h, w, n, dysample, xsample int) {
	panic("cpu: no direct convolution on this platform")
}

func convTapsDW(acc *float32, dy *float32, dystride int, x *float32, taps *int, npix, n, dysample, xsample int) {
	panic("cpu: no direct convolution on this platform")
}

func convTapsO4W24(y *float32, ystride int, x *float32, taps *int, ntaps int, w *float32, wtap int, bias *float32) {
	panic("cpu: no direct convolution on this platform")
}

func convTapsO4W48(y *float32, ystride int, x *float32, taps *int, ntaps int, w *float32, wtap int, bias *float32) {
	panic("cpu: no direct convolution on this platform")
}

func convTapsDW8(acc *float32, dy *float32, dystride int, x *float32, taps *int, groups, npix int) {
	panic("cpu: no direct convolution on this platform")
}

func convTapsO6W32(y *float32, ystride int, x *float32, taps *int, ntaps int, w *float32, wtap int, bias *float32) {
	panic("cpu: no direct convolution on this platform")
}

func convRow5DW6(acc *float32, dy *float32, dystride int, x *float32, rows *int, nrows, npix int) {
	panic("cpu: no direct convolution on this platform")
}

func convRow5DW8(acc *float32, dy *float32, dystride int, x *float32, rows *int, nrows, npix int) {
	panic("cpu: no direct convolution on this platform")
}
