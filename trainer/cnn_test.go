package trainer

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/gossip"
	"github.com/dml-project/dml/trainer/model"
)

// cnnCfg is LeNet-5 on a small set of synthetic 1×28×28 images.
func cnnCfg() Config {
	cfg := synthCfg()
	cfg.Model = LeNet5
	cfg.Data = DataConfig{Name: "synthetic-images", Shape: "1x28x28", Samples: 203, Classes: 3, Noise: 0.5}
	cfg.Opt.LR = 0.01 // momentum 0.9 at batch 8: 0.05 made ReLUs die
	return cfg
}

// dropoutCfg is a model file's network with dropout (in place after a
// linear layer, and after a GELU), layer norm and GELU, on the CNN tests'
// images.
func dropoutCfg() Config {
	cfg := cnnCfg()
	cfg.Model, cfg.Epochs = NetFile, 2
	cfg.Net = []model.LayerSpec{{Kind: model.KindFlatten}, {Kind: model.KindLinear, Name: "fc1", Out: 32}, {Kind: model.KindDropout, P: 0.3},
		{Kind: model.KindLayerNorm, Name: "ln1"}, {Kind: model.KindGELU}, {Kind: model.KindDropout, P: 0.5}, {Kind: model.KindLinear, Name: "fc2", Out: 3}}
	return cfg
}

// TestCNNSyncEquivalence: a CNN (LeNet-5, no batch norm) trained on N
// ranks × batch b has the weights of 1 rank × batch N·b, as the MLP does
// (TestSyncEquivalence), with augmentation too: a sample is transformed
// by its index in the whole set, whatever rank trains on it.
func TestCNNSyncEquivalence(t *testing.T) {
	for _, aug := range []string{"", "crop,flip"} {
		for _, n := range []int{2, 3} {
			t.Run(fmt.Sprintf("augment=%s/ranks=%d", aug, n), func(t *testing.T) {
				cfg := cnnCfg()
				cfg.Augment = aug
				checkOneRankEquivalent(t, n, cfg)
			})
		}
	}
	// Dropout too: a sample's mask is a function of its index in the
	// whole set, the epoch and the seed.
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("dropout/ranks=%d", n), func(t *testing.T) {
			checkOneRankEquivalent(t, n, dropoutCfg())
		})
	}
	noDrop := dropoutCfg()
	noDrop.Net = slices.DeleteFunc(slices.Clone(noDrop.Net), func(l model.LayerSpec) bool { return l.Kind == model.KindDropout })
	if equalFloats(mustRun(t, 1, noDrop)[0].Params, mustRun(t, 1, dropoutCfg())[0].Params) {
		t.Error("dropout trained the same weights as no dropout")
	}
	// And augmentation changes training (the check above is not vacuous).
	plain, aug := cnnCfg(), cnnCfg()
	aug.Augment = "crop,flip"
	if equalFloats(mustRun(t, 1, plain)[0].Params, mustRun(t, 1, aug)[0].Params) {
		t.Error("--augment crop,flip trained the same weights as no augmentation")
	}
}

// syncCase is a --sync strategy on a number of ranks, as the network
// tests run it.
type syncCase struct {
	name  string
	ranks int
	set   func(*Config)
}

// everySync is each --sync strategy once.
var everySync = []syncCase{
	{"allreduce", 2, func(c *Config) {}},
	{"ps-bsp", 3, func(c *Config) { c.Sync, c.PS.Servers = SyncPS, 1 }},
	{"dpsgd", 3, func(c *Config) { c.Sync, c.Topology = SyncDPSGD, gossip.Ring }},
	{"adpsgd", 2, func(c *Config) { c.Sync, c.Topology = SyncADPSGD, gossip.Ring }},
}

// TestNewLayersEveryStrategy: a network of the transformer's layers
// (layer norm, GELU, dropout) and one of the seeds' (local response
// normalisation, a padded max pool, a bottleneck block) train under every
// --sync strategy, every rank ending with the same weights, and keep
// learning (the loss falls).
func TestNewLayersEveryStrategy(t *testing.T) {
	// The seeds' layers learn slowly on these images: at LR 0.01 over 3
	// epochs the loss fell by 0.01–0.05, and AD-PSGD's asynchronous
	// gossip on a loaded machine could end above where it began.
	seeds := cnnCfg()
	seeds.Model, seeds.Epochs, seeds.Opt.LR = NetFile, 6, 0.03
	seeds.Net = []model.LayerSpec{{Kind: model.KindConv, Name: "c1", Out: 8, Kernel: 3, Pad: 1}, {Kind: model.KindReLU},
		{Kind: model.KindLRN, Size: 3, K: 2}, {Kind: model.KindMaxPool, Kernel: 3, Stride: 2, Pad: 1},
		{Kind: model.KindBottleneck, Name: "b1", Out: 2, Stride: 2}, {Kind: model.KindAvgPool}, {Kind: model.KindFlatten},
		{Kind: model.KindDropout, P: 0.2}, {Kind: model.KindLinear, Name: "fc", Out: 3}}
	transformer := dropoutCfg()
	transformer.Epochs = 3
	for _, net := range []struct {
		name string
		cfg  Config
	}{{"transformer-layers", transformer}, {"seeds-layers", seeds}} {
		for _, tc := range append(everySync, syncCase{"ps-ssp", 3, func(c *Config) {
			c.Sync, c.PS.Servers, c.PS.Consistency, c.PS.Staleness = SyncPS, 1, ps.SSP, 2
		}}) {
			t.Run(net.name+"/"+tc.name, func(t *testing.T) {
				cfg := net.cfg
				tc.set(&cfg)
				res := mustRun(t, tc.ranks, cfg)
				last := res[len(res)-1]
				if eps := last.Epochs; len(eps) > 0 && !(eps[len(eps)-1].Loss < eps[0].Loss) {
					t.Errorf("loss %v → %v: not learning", eps[0].Loss, eps[len(eps)-1].Loss)
				}
				for r := range res {
					if res[r].Params != nil && !equalFloats(res[r].Params, res[len(res)-1].Params) {
						t.Fatalf("rank %d's final weights differ", r)
					}
				}
			})
		}
	}
}

// TestCNNEveryStrategy: LeNet-5 trains under every --sync strategy to
// well above chance on the synthetic images, and every rank ends with the
// same weights.
func TestCNNEveryStrategy(t *testing.T) {
	for _, tc := range everySync {
		t.Run(tc.name, func(t *testing.T) {
			cfg := cnnCfg()
			cfg.Epochs = 8
			tc.set(&cfg)
			res := mustRun(t, tc.ranks, cfg)
			if acc := res[len(res)-1].TestAcc; !(acc > 0.7) {
				t.Errorf("test accuracy %.3f, want > 0.7 (chance 0.33)", acc)
			}
			for r := range res {
				if !equalFloats(res[r].Params, res[0].Params) {
					t.Fatalf("rank %d's final weights differ from rank 0's", r)
				}
			}
			if got := res[0].Arch.Describe(); got != "1×28×28: conv1 6k5p2, relu, maxpool 2, conv2 16k5, relu, maxpool 2, flatten, fc1 120, relu, fc2 84, relu, fc3 3" {
				t.Errorf("architecture %s", got)
			}
		})
	}
}

// bnCfg is a small residual network with batch norm (a model file's) on
// synthetic 2×8×8 images.
func bnCfg() Config {
	cfg := cnnCfg()
	cfg.Model = NetFile
	cfg.Net = []model.LayerSpec{{Kind: model.KindConv, Name: "conv1", Out: 4, Kernel: 3, Pad: 1, NoBias: true}, {Kind: model.KindBatchNorm, Name: "bn1"}, {Kind: model.KindReLU},
		{Kind: model.KindBlock, Name: "layer1.0", Out: 4}, {Kind: model.KindBlock, Name: "layer2.0", Out: 8, Stride: 2},
		{Kind: model.KindAvgPool}, {Kind: model.KindFlatten}, {Kind: model.KindLinear, Name: "fc", Out: 3}}
	cfg.Data.Shape = "2x8x8"
	cfg.Opt.LR = 0.05
	return cfg
}

// TestBatchNormRanks: a network with batch norm and residual blocks
// trains to the same accuracy band on 1 and 2 ranks (each rank normalises
// with its own batch's statistics, so the weights differ), and every rank
// ends with the same weights and the same running statistics, their
// average over the ranks.
func TestBatchNormRanks(t *testing.T) {
	cfg := bnCfg()
	cfg.Epochs = 6
	one := cfg
	one.Batch *= 2
	r1 := mustRun(t, 1, one)[0]
	r2 := mustRun(t, 2, cfg)
	if !(r1.TestAcc > 0.8) || !(r2[0].TestAcc > 0.8) || math.Abs(r1.TestAcc-r2[0].TestAcc) > 0.1 {
		t.Errorf("test accuracy %.3f on 1 rank, %.3f on 2: want both > 0.8 and within 0.1", r1.TestAcc, r2[0].TestAcc)
	}
	if len(r2[0].ModelState) != r2[0].Arch.NumState() || r2[0].Arch.NumState() == 0 {
		t.Fatalf("running statistics: %d values, the model has %d", len(r2[0].ModelState), r2[0].Arch.NumState())
	}
	if !equalFloats(r2[0].Params, r2[1].Params) || !equalFloats(r2[0].ModelState, r2[1].ModelState) {
		t.Error("the ranks end with different weights or statistics")
	}
	if equalFloats(r2[0].ModelState, r2[0].Arch.InitState()) {
		t.Error("the running statistics never moved")
	}
}

// TestCNNNeedsConvOps: on a backend without convolution ops (a stand-in
// device), a CNN is refused in one line
// that says so, on every rank, and nothing trains.
func TestCNNNeedsConvOps(t *testing.T) {
	_, errs := runWorldWith(t, 2, cnnCfg(), func(int) kernels.Backend { return &deviceBackend{b: cpu.New()} })
	for r, err := range errs {
		if !errors.Is(err, kernels.ErrNoConv) || !strings.Contains(err.Error(), "layers need convolution ops, which backend") {
			t.Errorf("rank %d: %v, want ErrNoConv saying the backend lacks convolution ops", r, err)
		}
	}
}
