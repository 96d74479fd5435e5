//go:build !purego

package cpu

// The 2×2 max pool's 8-output blocks (pool_amd64.s), under useAVX2.

//go:noescape
func maxPool22x8(y, r0, r1 *float32) bool

//go:noescape
func maxPoolGrad22x8(d0, d1, r0, r1, dy *float32) bool

//go:noescape
func maxPool22x4(y, r0, r1 *float32) bool

//go:noescape
func maxPoolGrad22x4(d0, d1, r0, r1, dy *float32) bool
