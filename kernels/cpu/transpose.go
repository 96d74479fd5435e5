package cpu

import "github.com/dml-project/dml/kernels"

// Transpose01: see kernels.ConvOps. Rows of inner values are copied
// whole; a convolution's output planes are 64–784 values, so each is one
// copy.
func (be *Backend) Transpose01(dst, src kernels.Buffer, a, b, inner int) error {
	dd, sd := be.data(dst), be.data(src)
	if err := kernels.CheckTranspose("cpu.Transpose01", len(dd), len(sd), a, b, inner); err != nil {
		return err
	}
	for i := range a {
		for j := range b {
			copy(dd[(j*a+i)*inner:(j*a+i+1)*inner], sd[(i*b+j)*inner:(i*b+j+1)*inner])
		}
	}
	return nil
}
