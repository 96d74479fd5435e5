//go:build cuda

package cuda

import (
	"math"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
)

// The GPU-vs-CPU training check: an MLP 784-64-10 trained for 20 steps of
// momentum SGD (lr 0.05, mu 0.9), batch 64, from the same initial weights
// on the same batches (inputs N(0, 1), labels from a random linear
// teacher), on the CPU backend and on this one. The backends round
// differently (GEMM summation order, exp/log), so they agree to a
// tolerance, stated here:
//
//   - the mean loss of every step: |gpu − cpu| ≤ tol.loss·(1 + |cpu|);
//   - the final weights, relative to how far training moved them:
//     ‖gpu − cpu‖₂ ≤ tol.weight·‖cpu − init‖₂ (the update is 44% of ‖w‖
//     here), and every element within tol.elem·max|cpu| of the CPU's.
//
// FP32: loss 1e-5, weight 1e-5, elem 1e-5 (measured on an H200: 7e-8,
// 4e-7, 3e-7). TF32 (every GEMM's inputs rounded to 10 mantissa bits, so
// each step's gradient is off by ~1e-3 relative and 20 steps at this
// learning rate accumulate it): loss 5e-3, weight 0.1, elem 0.05 (measured:
// 1.2e-3, 0.023, 0.017). A wrong op is off by O(1). The CPU's loss must
// also fall (the check trains something).
const (
	trainSteps, trainBatch = 20, 64
	trainLR, trainMu       = 0.05, 0.9
)

var trainSizes = []int{784, 64, 10}

type trainTol struct{ loss, weight, elem float64 }

func TestTrainMatchesCPU(t *testing.T) {
	testTrainMatchesCPU(t, kernels.FP32, trainTol{1e-5, 1e-5, 1e-5})
}

func TestTrainMatchesCPUTF32(t *testing.T) {
	testTrainMatchesCPU(t, kernels.TF32, trainTol{5e-3, 0.1, 0.05})
}

// trainRun trains on be and returns the loss per step and final weights.
func trainRun(t *testing.T, be kernels.Backend, init, x, labels []float32) (losses []float64, params []float32) {
	m, err := newMLP(be, trainSizes, trainBatch, init)
	if err != nil {
		t.Fatalf("%s: %v", be.Name(), err)
	}
	in := trainSizes[0]
	stats := make([]float32, 2)
	for s := range trainSteps {
		lo, hi := s*trainBatch, (s+1)*trainBatch
		if err := m.step(x[lo*in:hi*in], labels[lo:hi], trainLR, trainMu); err != nil {
			t.Fatalf("%s step %d: %v", be.Name(), s, err)
		}
		if err := be.Download(stats, m.stats); err != nil {
			t.Fatalf("%s step %d: %v", be.Name(), s, err)
		}
		losses = append(losses, float64(stats[0])/trainBatch)
	}
	params = make([]float32, paramCount(trainSizes))
	if err := be.Download(params, m.params); err != nil {
		t.Fatal(err)
	}
	return losses, params
}

func testTrainMatchesCPU(t *testing.T, p kernels.Precision, tol trainTol) {
	gpu := open(t, kernels.Options{Precision: p})
	defer gpu.Close()
	if p == kernels.TF32 && !gpu.TF32() {
		t.Skipf("no TF32 GEMM on this device (%s PTX)", gpu.Arch())
	}
	init := initParams(trainSizes, 7)
	x, labels := teacherData(8, trainSteps*trainBatch, trainSizes[0], trainSizes[len(trainSizes)-1])
	cpuLoss, cpuW := trainRun(t, cpu.New(), init, x, labels)
	gpuLoss, gpuW := trainRun(t, gpu, init, x, labels)

	worst := 0.0
	for s := range cpuLoss {
		d := math.Abs(gpuLoss[s]-cpuLoss[s]) / (1 + math.Abs(cpuLoss[s]))
		worst = max(worst, d)
		if d > tol.loss || math.IsNaN(gpuLoss[s]) {
			t.Errorf("step %d: loss %.9g on the GPU, %.9g on the CPU (relative difference %.3g > %.3g)", s, gpuLoss[s], cpuLoss[s], d, tol.loss)
		}
	}
	if !(cpuLoss[trainSteps-1] < 0.8*cpuLoss[0]) {
		t.Errorf("the CPU run did not learn: loss %.4g → %.4g", cpuLoss[0], cpuLoss[trainSteps-1])
	}
	var diff2, upd2, maxAbs, maxDiff float64
	for i, w := range cpuW {
		d := float64(gpuW[i]) - float64(w)
		u := float64(w) - float64(init[i])
		diff2 += d * d
		upd2 += u * u
		maxAbs = max(maxAbs, math.Abs(float64(w)))
		maxDiff = max(maxDiff, math.Abs(d))
		if math.IsNaN(d) {
			t.Fatalf("weight %d is %v on the GPU", i, gpuW[i])
		}
	}
	rel := math.Sqrt(diff2 / upd2)
	if rel > tol.weight {
		t.Errorf("final weights: ‖gpu − cpu‖/‖cpu − init‖ = %.3g > %.3g", rel, tol.weight)
	}
	if maxDiff > tol.elem*maxAbs {
		t.Errorf("final weights: max |gpu − cpu| = %.3g > %.3g·max|cpu| = %.3g", maxDiff, tol.elem, tol.elem*maxAbs)
	}
	t.Logf("%s on %s: loss %.5f → %.5f (CPU %.5f → %.5f); worst per-step loss difference %.3g relative; final weights ‖Δ‖/‖update‖ = %.3g, max|Δ|/max|w| = %.3g",
		p, gpu.Device().Name, gpuLoss[0], gpuLoss[trainSteps-1], cpuLoss[0], cpuLoss[trainSteps-1], worst, rel, maxDiff/maxAbs)
}
