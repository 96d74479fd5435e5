//go:build !amd64 || purego

package cpu

func maxPool22x8(y, r0, r1 *float32) bool { return false }

func maxPoolGrad22x8(d0, d1, r0, r1, dy *float32) bool { return false }

func maxPool22x4(y, r0, r1 *float32) bool { return false }

func maxPoolGrad22x4(d0, d1, r0, r1, dy *float32) bool { return false }
