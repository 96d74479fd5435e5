//go:build cuda

package main

import (
	"os/exec"
	"path/filepath"
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

// TestCUDABackendWithoutGPU runs the tagged binary the way a user does on a
// machine without a GPU (or without the driver's libcuda): --backend cuda
// in train and eval ends with one line saying so and exit 1, not a panic
// trace (a nil *Backend inside a non-nil kernels.Backend was Closed).
func TestCUDABackendWithoutGPU(t *testing.T) {
	if _, err := cuda.Devices(); err == nil {
		t.Skip("this machine has a CUDA device: the no-GPU path cannot be shown here")
	}
	bin := filepath.Join(t.TempDir(), "dml-cuda")
	if out, err := exec.Command("go", "build", "-tags", "cuda", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building the cuda binary: %v\n%s", err, out)
	}
	dir := t.TempDir()
	weights := filepath.Join(dir, "w.npz")
	small := []string{"--data", "synthetic", "--samples", "256", "--features", "8"}
	if r := runCmd(t, append([]string{bin, "train", "--epochs", "1", "--model", "softmax", "--save", weights}, small...)); r.code != 0 {
		t.Fatalf("cpu training for the eval case: exit %d\n%s", r.code, r.stderr)
	}
	for name, args := range map[string][]string{
		"train": append([]string{"train", "--backend", "cuda", "--epochs", "1", "--model", "softmax"}, small...),
		"eval":  append([]string{"eval", "--backend", "cuda", "--weights", weights}, small...),
	} {
		r := runCmd(t, append([]string{bin}, args...))
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.code != 1 || len(lines) != 1 || !strings.Contains(r.stderr, "no CUDA device") ||
			strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine") {
			t.Errorf("%s --backend cuda without a GPU: exit %d, want 1 with one line naming the missing device; stderr:\n%s", name, r.code, r.stderr)
		}
	}
}
