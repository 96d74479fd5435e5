package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestDevicesWithoutCUDA: a binary built without the cuda tag answers
// `dml devices` in one line and exits 1.
func TestDevicesWithoutCUDA(t *testing.T) {
	if gpuInfo != nil {
		t.Skip("built with the cuda tag (devices_cuda_test.go covers it)")
	}
	var out, errb bytes.Buffer
	code := run([]string{"devices"}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "built without CUDA") || strings.Count(errb.String(), "\n") != 1 {
		t.Fatalf("dml devices without CUDA: exit %d, stderr %q", code, errb.String())
	}
}
