package main

import (
	"os"
	"strings"
	"testing"

	"github.com/dml-project/dml/kernels/onednn"
)

// TestBenchOps: dml bench ops prints a row per convolution and batch-norm
// shape with both providers' times, and bad input is one line, exit 2.
func TestBenchOps(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "vgg"}, `bench ops: --model "vgg": want resnet20 or lenet5`},
		{[]string{"--backend", "cpu"}, "bench ops: --backend cpu: want blas or cuda"},
		{[]string{"--kernels", "dml"}, `bench ops: --kernels "dml": want a library`},
		{[]string{"--rounds", "0"}, "bench ops: --batch 64, --rounds 0: want 1 or more"},
	} {
		r := dml(t, 0, append([]string{"bench", "ops"}, tc.args...)...)
		if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); r.code != 2 || len(lines) != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("bench ops %v: exit %d, stderr %q; want exit 2 and one line with %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if _, err := onednn.Load(1); err != nil && os.Getenv("CI") == "" {
		t.Skipf("no oneDNN here: %v", err)
	}
	r := dml(t, 0, "bench", "ops", "--model", "resnet20", "--batch", "2", "--rounds", "1")
	if r.code != 0 {
		t.Fatalf("bench ops: exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"against blas (conv: onednn", "| conv | conv1 |", "| conv | layer1.0.conv1 (+5 alike) |", "| conv | layer3.0.shortcut.0 |",
		"| batchnorm | bn1 (+6 alike) |", "| batchnorm | layer3.0.bn1 (+6 alike) |", "all layers, once each: dml "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("bench ops: no %q in\n%s", want, r.stdout)
		}
	}
}
