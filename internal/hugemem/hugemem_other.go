//go:build !linux

package hugemem

func mapHuge(n int) ([]float32, func()) { return nil, nil }

// Advise does nothing here.
func Advise([]float32) {}
