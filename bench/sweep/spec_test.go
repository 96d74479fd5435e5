package sweep

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseStrategy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		servers int
		want    []string // Args
		family  string
		err     string
	}{
		{"allreduce", 1, []string{"--sync", "allreduce", "--allreduce", "auto"}, "allreduce", ""},
		{"allreduce-ring", 1, []string{"--sync", "allreduce", "--allreduce", "ring"}, "allreduce", ""},
		{"allreduce-tree", 1, []string{"--sync", "allreduce", "--allreduce", "tree"}, "allreduce", ""},
		{"allreduce-mpi", 1, []string{"--sync", "allreduce", "--allreduce", "mpi"}, "allreduce", ""},
		{" PS-SSP ", 2, []string{"--sync", "ps", "--consistency", "ssp", "--servers", "2"}, "ps-ssp", ""},
		{"ps-dssp", 1, []string{"--sync", "ps", "--consistency", "dssp", "--servers", "1"}, "ps-dssp", ""},
		{"dpsgd", 1, []string{"--sync", "dpsgd"}, "dpsgd", ""},
		{"adpsgd", 1, []string{"--sync", "adpsgd"}, "adpsgd", ""},
		{"allreduce+fp16+ef", 1, []string{"--sync", "allreduce", "--allreduce", "auto", "--compress", "fp16", "--error-feedback"}, "allreduce", ""},
		{"allreduce-ring+local4", 1, []string{"--sync", "allreduce", "--allreduce", "ring", "--local-steps", "4"}, "allreduce", ""},
		{"allreduce+bf16", 1, []string{"--sync", "allreduce", "--allreduce", "auto", "--compress", "bf16"}, "allreduce", ""},
		{"allreduce+local0", 1, nil, "", `want localH`},
		{"allreduce+fp8", 1, nil, "", `unknown mode "fp8"`},
		{"allreduce+fp16+bf16", 1, nil, "", `"fp16" and "bf16" both set one thing`},
		{"allreduce+ef+ef", 1, nil, "", `mode "ef" given twice`},
		{"ps-bsp+fp16", 1, nil, "", `allreduce's`},
		{"allreduce-butterfly", 1, nil, "", `unknown strategy "allreduce-butterfly"`},
		{"ps-allreduce", 1, nil, "", `unknown strategy "ps-allreduce"`},
		{"ps-bsp", 0, nil, "", "needs at least 1"},
		{"bsp", 1, nil, "", "did you mean ps-bsp"},
		{"horovod", 1, nil, "", "want allreduce, allreduce-ring"},
		{"", 1, nil, "", "unknown strategy"},
	} {
		st, err := ParseStrategy(tc.name, tc.servers)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrSpec) {
				t.Errorf("%q: got %v, want an ErrSpec containing %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(st.Args, tc.want) || st.Family != tc.family {
			t.Errorf("%q: got %+v, %v; want args %v family %s", tc.name, st, err, tc.want, tc.family)
		}
	}
	// Every listed name parses.
	for _, n := range StrategyNames() {
		if _, err := ParseStrategy(n, 1); err != nil {
			t.Errorf("StrategyNames has %q, which does not parse: %v", n, err)
		}
	}
}

func TestParseModel(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{"mlp", []string{"--model", "mlp"}, ""},
		{"mlp:256,128", []string{"--model", "mlp", "--hidden", "256,128"}, ""},
		{"softmax", []string{"--model", "softmax"}, ""},
		{"logreg", []string{"--model", "logreg"}, ""},
		{"resnet", nil, `unknown model "resnet"`},
		{"softmax:10", nil, "only mlp has hidden layers"},
		{"mlp:0", nil, "not a positive integer"},
		{"mlp:", nil, "not a positive integer"},
	} {
		m, err := ParseModel(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: got %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(m.Args, tc.want) {
			t.Errorf("%q: got %v, %v; want %v", tc.in, m.Args, err, tc.want)
		}
	}
}

func TestPlan(t *testing.T) {
	s := DefaultSpec()
	s.Ranks = []int{4, 1, 2, 2}
	s.Strategies = []string{"ps-bsp", "allreduce"}
	s.Batches = []int{16, 32}
	runs, err := Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3*2*2 {
		t.Fatalf("%d runs, want 12 (ranks deduplicated)", len(runs))
	}
	// Ranks ascend within a batch, so that each run's baseline comes first.
	prev := 0
	for _, r := range runs[:6] {
		if r.Batch != 16 || r.Ranks < prev {
			t.Errorf("run %s out of order", r.ID)
		}
		prev = r.Ranks
	}
	if runs[0].ID != "mlp-256-128_ps-bsp_b16_n1" {
		t.Errorf("first id %q", runs[0].ID)
	}
	if !slices.Contains(runs[0].Args, "--noise") || !slices.Contains(runs[0].Args, "--eval-every") {
		t.Errorf("synthetic data flags missing: %v", runs[0].Args)
	}

	for _, tc := range []struct {
		edit func(*Spec)
		err  string
	}{
		{func(s *Spec) { s.Ranks = []int{1, 0} }, "0 ranks"},
		{func(s *Spec) { s.Ranks = []int{-2} }, "-2 ranks"},
		{func(s *Spec) { s.Ranks = nil }, "at least one rank count"},
		{func(s *Spec) { s.Strategies = []string{"allreduce", "nope"} }, `unknown strategy "nope"`},
		{func(s *Spec) { s.Models = []string{"cnn"} }, `unknown model "cnn"`},
		{func(s *Spec) { s.Batches = []int{0} }, "--batch: 0"},
		{func(s *Spec) { s.Epochs = 0 }, "--epochs 0"},
		{func(s *Spec) { s.Target = 1.5 }, "--target 1.5"},
		{func(s *Spec) { s.Launcher = nil }, "--launcher is empty"},
		{func(s *Spec) { s.RunTimeout = 0 }, "--run-timeout"},
	} {
		s := DefaultSpec()
		tc.edit(&s)
		_, err := Plan(s)
		if err == nil || !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("got %v, want an ErrSpec containing %q", err, tc.err)
		}
	}
}

func TestLauncherArgs(t *testing.T) {
	run := Run{Ranks: 4, Args: []string{"--model", "mlp"}}
	got := LauncherArgs([]string{"mpirun", "--oversubscribe"}, "/bin/dml", run, "--metrics", "m")
	want := []string{"mpirun", "--oversubscribe", "-np", "4", "/bin/dml", "train", "--model", "mlp", "--metrics", "m"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
	got = LauncherArgs([]string{"srun", "--mpi=pmix", "-n", "{np}"}, "dml", run)
	want = []string{"srun", "--mpi=pmix", "-n", "4", "dml", "train", "--model", "mlp"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

func TestParseSpec(t *testing.T) {
	s, err := ParseSpec([]byte(`
ranks: [1, 2]
sync: [allreduce-ring, ps-asp]
model: ["mlp:32", softmax]
batch: [8]
epochs: 1
launcher: srun --mpi=pmix -n {np}
train_args: [--backend, cpu]
run_timeout: 90s
`), DefaultSpec())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Ranks, []int{1, 2}) || !slices.Equal(s.Strategies, []string{"allreduce-ring", "ps-asp"}) ||
		!slices.Equal(s.Models, []string{"mlp:32", "softmax"}) || s.Epochs != 1 || s.RunTimeout != 90*time.Second ||
		!slices.Equal(s.Launcher, []string{"srun", "--mpi=pmix", "-n", "{np}"}) || !slices.Equal(s.TrainArgs, []string{"--backend", "cpu"}) {
		t.Errorf("got %+v", s)
	}
	if s.Data != DefaultSpec().Data || s.Target != DefaultSpec().Target {
		t.Errorf("keys the file lacks must keep the defaults: %+v", s)
	}
	if _, err := ParseSpec([]byte("rank: [1]\n"), DefaultSpec()); err == nil || !errors.Is(err, ErrSpec) {
		t.Errorf("unknown key: got %v", err)
	}
	if _, err := ParseSpec([]byte("ranks: one\n"), DefaultSpec()); err == nil {
		t.Error("ranks: one: no error")
	}
	if s, err := ParseSpec(nil, DefaultSpec()); err != nil || s.Epochs != DefaultSpec().Epochs {
		t.Errorf("empty file: %v", err)
	}
}

// TestExampleSpecFile: the example in docs/sweep parses and plans.
func TestExampleSpecFile(t *testing.T) {
	s, err := LoadSpec("../../docs/sweep/sweep.yaml", DefaultSpec())
	if err != nil {
		t.Fatal(err)
	}
	runs, err := Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3*9*2*2 || !slices.Equal(s.TrainArgs, []string{"--backend", "auto", "--lr", "0.05"}) {
		t.Errorf("%d runs, train args %q", len(runs), s.TrainArgs)
	}
}

// TestPerRunPaths: the paths of --checkpoint-dir and --save in a sweep's
// --train-args become each run's own, in both spellings; nothing else
// changes.
func TestPerRunPaths(t *testing.T) {
	in := []string{"--lr", "0.1", "--checkpoint-dir", "/ck", "--save=/w/model.npz", "--keep", "2", "--resume"}
	got := strings.Join(PerRunPaths(in, "mlp_ps-bsp_b32_n2"), " ")
	want := "--lr 0.1 --checkpoint-dir /ck/mlp_ps-bsp_b32_n2 --save=/w/mlp_ps-bsp_b32_n2-model.npz --keep 2 --resume"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if in[3] != "/ck" {
		t.Errorf("the spec's own arguments changed: %v", in)
	}
}
