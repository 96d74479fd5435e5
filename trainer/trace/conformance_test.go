package trace_test

import (
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/kernels/kernelstest"
	"github.com/dml-project/dml/trainer/trace"
)

// TestTracedCPUConformance runs the kernels conformance suite on the CPU
// backend seen through the decorator: tracing must not change what any op
// computes, returns or rejects. Every op the suite calls is recorded.
func TestTracedCPUConformance(t *testing.T) {
	var recs []*trace.Recorder
	kernelstest.Run(t, func() kernels.Backend {
		rec := trace.NewRecorder(trace.Options{Capacity: 1 << 20})
		recs = append(recs, rec)
		return trace.Backend(cpu.New(), rec)
	})
	ops := map[string]bool{}
	for _, rec := range recs {
		for _, s := range rec.Snapshot().Spans {
			ops[s.Name] = true
		}
	}
	for _, op := range []string{"Alloc", "Free", "Upload", "Download", "Copy", "Fill", "Sync", "Close",
		"Gemm", "AddBias", "SumRows", "Relu", "ReluGrad", "SoftmaxCrossEntropy", "SigmoidCrossEntropy",
		"Predict", "Axpy", "Scale", "Sum", "Dot", "NonFinite", "Optimize"} {
		if !ops[op] {
			t.Errorf("no %s span recorded while the suite ran", op)
		}
	}
}
