package model

import (
	"os"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/blas"
)

// TestChooseConvs: on the blas backend under --kernels auto (oneDNN's
// convolutions on trial) every conv layer gets a choice from a measured
// shape, both ways timed; with oneDNN forced or with dml's kernels there
// is nothing to choose.
func TestChooseConvs(t *testing.T) {
	arch, err := NewNet(Shape{C: 3, H: 32, W: 32}, ResNet20(10), 10, SoftmaxCE)
	if err != nil {
		t.Fatal(err)
	}
	open := func(k kernels.KernelChoice) kernels.Backend {
		be, err := blas.Open(kernels.Options{Kernels: k})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { be.Close() })
		return be
	}
	auto := open(kernels.KernelChoice{})
	if !kernels.OnTrial(auto) {
		if os.Getenv("CI") == "" {
			t.Skip("no oneDNN here")
		}
		t.Fatal("--kernels auto on blas: oneDNN not on trial")
	}
	choice, timings, err := ChooseConvs(arch, auto, 4)
	if err != nil {
		t.Fatal(err)
	}
	convs := arch.ConvLayers()
	if len(choice) != len(convs) || len(convs) != 21 {
		t.Fatalf("%d choices for %d conv layers (ResNet-20 has 21)", len(choice), len(convs))
	}
	layers := 0
	for _, tm := range timings {
		layers += len(tm.Layers)
		if tm.Own <= 0 || tm.Lib <= 0 || tm.Own == maxDuration || tm.Lib == maxDuration || tm.FLOPs <= 0 {
			t.Errorf("%v: own %v, library %v, %g FLOPs", tm.Layers, tm.Own, tm.Lib, tm.FLOPs)
		}
	}
	if len(timings) != 8 || layers != 21 {
		t.Errorf("%d shapes covering %d layers, want ResNet-20's 8 and 21", len(timings), layers)
	}
	for _, k := range []kernels.KernelChoice{{Own: true}, {Libs: []string{kernels.LibOneDNN}}} {
		if c, tm, err := ChooseConvs(arch, open(k), 4); c != nil || tm != nil || err != nil {
			t.Errorf("--kernels %s: choice %v, %d timings, %v; want none", k, c, len(tm), err)
		}
	}
}
