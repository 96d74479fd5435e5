package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dml-project/dml/trainer/model"
)

// TestEvalRefusesBadWeights (issue 29): weights that overflow on the way
// (finite, but 3e38) give a NaN loss, and a batch norm's negative
// variance makes no sense: dml eval says so in one line and exits
// non-zero instead of printing an accuracy.
func TestEvalRefusesBadWeights(t *testing.T) {
	dir := t.TempDir()
	net := []model.LayerSpec{
		{Kind: model.KindConv, Name: "conv1", Out: 4, Kernel: 3, Pad: 1, NoBias: true},
		{Kind: model.KindBatchNorm, Name: "bn1"}, {Kind: model.KindReLU},
		{Kind: model.KindAvgPool}, {Kind: model.KindFlatten}, {Kind: model.KindLinear, Name: "fc", Out: 4},
	}
	arch, err := model.NewNet(model.Shape{C: 1, H: 8, W: 8}, net, 4, model.SoftmaxCE)
	if err != nil {
		t.Fatal(err)
	}
	yaml := filepath.Join(dir, "net.yaml")
	mustWrite(t, yaml, "layers:\n - {kind: conv, name: conv1, out: 4, kernel: 3, pad: 1, no_bias: true}\n - {kind: batchnorm, name: bn1}\n - {kind: relu}\n - {kind: avgpool}\n - {kind: flatten}\n - {kind: linear, name: fc, out: 4}\n")
	data := []string{"--model-file", yaml, "--data", "synthetic-images", "--shape", "1x8x8", "--classes", "4", "--samples", "64"}
	for _, c := range []struct {
		name   string
		change func(params, state []float32)
		want   string
	}{
		{"huge", func(p, _ []float32) {
			for i := range p {
				p[i] = 3e38
			}
		}, "the weights overflow"},
		{"negvar", func(_, s []float32) {
			for _, tn := range arch.StateTensors() {
				if strings.HasSuffix(tn.Name, ".running_var") {
					s[tn.Off] = -1
				}
			}
		}, "bn1.running_var holds a negative variance"},
	} {
		params, state := arch.InitParams(1), arch.InitState()
		c.change(params, state)
		w := filepath.Join(dir, c.name+".npz")
		if err := model.SaveNPZModel(w, arch, params, state, nil); err != nil {
			t.Fatal(err)
		}
		r := dml(t, 0, append([]string{"eval", "--weights", w}, data...)...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stdout, "accuracy") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want a non-zero exit saying %q", c.name, r.code, r.stdout, r.stderr, c.want)
		}
	}
}

func mustWrite(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
