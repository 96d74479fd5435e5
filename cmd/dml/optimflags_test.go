package main

import (
	"flag"
	"io"
	"testing"

	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/trainer"
)

// TestOptimizerDefaults: lars takes You et al.'s trust coefficient unless
// --trust-coef is given; every other optimizer's configuration has none
// (so that theirs is what it was before the flag, --trust-coef or not),
// and adam's betas are as before.
func TestOptimizerDefaults(t *testing.T) {
	for _, tc := range []struct {
		args              []string
		trust, beta1, eps float32
	}{
		{[]string{"--optimizer", "lars"}, optim.DefaultTrustCoef, 0, 1e-10},
		{[]string{"--optimizer", "lars", "--trust-coef", "0.02"}, 0.02, 0, 1e-10},
		{[]string{"--optimizer", "momentum", "--trust-coef", "0.02"}, 0, 0, 1e-10},
		{[]string{"--optimizer", "adam", "--trust-coef", "0.02"}, 0, optim.DefaultBeta1, optim.DefaultAdamEps},
		{[]string{}, 0, 0, 1e-10},
	} {
		cfg := trainer.DefaultConfig()
		fs := flag.NewFlagSet("train", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		registerTrainFlags(fs, &cfg)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		adamDefaults(fs, &cfg.Opt)
		if o := cfg.Opt; o.TrustCoef != tc.trust || o.Beta1 != tc.beta1 || o.Eps != tc.eps {
			t.Errorf("%q: trust %v beta1 %v eps %v, want %v %v %v", tc.args, o.TrustCoef, o.Beta1, o.Eps, tc.trust, tc.beta1, tc.eps)
		}
	}
}
