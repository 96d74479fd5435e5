//go:build !amd64

package collectives

func encodeF16Vec(dst []uint16, src []float32, scale float32) int         { return 0 }
func decodeF16Vec(dst []float32, src []uint16, inv float32, add bool) int { return 0 }
