package cpu

import (
	"fmt"
	"math"

	"github.com/dml-project/dml/kernels"
)

// shapeError returns an error wrapping kernels.ErrShape that names the op
// and says what did not fit.
func shapeError(op, format string, args ...any) error {
	return fmt.Errorf("cpu.%s: %s: %w", op, fmt.Sprintf(format, args...), kernels.ErrShape)
}

// checkLen reports an argument of got elements where want are needed.
func checkLen(op, name string, got, want int) error {
	if got != want {
		return shapeError(op, "%s has %d elements, want %d", name, got, want)
	}
	return nil
}

// checkMatrix reports an argument of got elements that is not a rows×cols
// matrix, including negative or overflowing dimensions.
func checkMatrix(op, name string, got, rows, cols int) error {
	if rows < 0 || cols < 0 || (cols != 0 && rows > math.MaxInt/cols) {
		return shapeError(op, "%s is %d×%d: bad dimensions", name, rows, cols)
	}
	if got != rows*cols {
		return shapeError(op, "%s has %d elements, want %d×%d = %d", name, got, rows, cols, rows*cols)
	}
	return nil
}

// firstError returns the first non-nil error of errs.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
