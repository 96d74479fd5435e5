//go:build cuda

package main

import (
	"strings"
	"testing"

	"github.com/dml-project/dml/cuda"
)

// TestCUDADevices lists the devices for local ranks 0 and 1: each marks
// exactly one device, local rank mod count; without a GPU the error says
// "no CUDA device".
func TestCUDADevices(t *testing.T) {
	for _, lr := range []int{0, 1} {
		summary, lines, err := cudaDevices(lr)
		if err != nil {
			if !cuda.ErrNoDevice(err) || !strings.HasPrefix(err.Error(), "no CUDA device: ") {
				t.Fatalf("local rank %d: %v", lr, err)
			}
			t.Skip(err)
		}
		want := cuda.DeviceFor(lr, len(lines))
		marked := 0
		for i, l := range lines {
			if strings.HasPrefix(l, "*") {
				marked++
				if i != want {
					t.Errorf("local rank %d: device %d marked, want %d", lr, i, want)
				}
			}
			if !strings.Contains(l, "compute capability") || !strings.Contains(l, "GiB") {
				t.Errorf("line %q lacks the compute capability or memory", l)
			}
		}
		if marked != 1 || !strings.Contains(summary, "uses device") {
			t.Errorf("local rank %d: %d devices marked; summary %q", lr, marked, summary)
		}
		t.Logf("local rank %d: %s\n%s", lr, summary, strings.Join(lines, "\n"))
	}
}
