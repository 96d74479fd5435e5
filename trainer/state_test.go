package trainer

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/trainer/internal/numtest"
	"github.com/dml-project/dml/trainer/model"
)

// TestResume: N steps, export the TrainState, load it into fresh trainers,
// M more steps = N+M steps straight, bit for bit, for every optimizer,
// stopping mid-epoch and at an epoch's end.
func TestResume(t *testing.T) {
	for _, opt := range optim.Kinds {
		for _, split := range [][2]int{{5, 14}, {13, 6}, {1, 25}} {
			n, m := split[0], split[1]
			t.Run(fmt.Sprintf("opt=%v/N=%d/M=%d", opt, n, m), func(t *testing.T) {
				cfg := synthCfg()
				cfg.Opt.Kind, cfg.Shuffle = opt, true // 13 steps an epoch on 2 ranks
				straight := cfg
				straight.MaxSteps = n + m
				want := mustRun(t, 2, straight)[0]

				first := cfg
				first.MaxSteps = n
				a := mustRun(t, 2, first)[0]
				st := a.State
				if st == nil || st.Steps != n || (opt != optim.SGD) != (len(st.Opt) > 0) {
					t.Fatalf("state after %d steps: %+v", n, st)
				}
				if wantPos := (Position{Epoch: 1 + n/13, Step: n % 13, Steps: n}); !reflect.DeepEqual(st.Position, wantPos) {
					t.Errorf("position %+v, want %+v", st.Position, wantPos)
				}
				res, errs := runWorldFrom(t, 2, straight, st, nil)
				for r, err := range errs {
					if err != nil {
						t.Fatalf("rank %d: %v", r, err)
					}
				}
				got := res[0]
				if got.Steps != n+m || !slices.Equal(got.Params, want.Params) || !slices.Equal(got.State.Opt, want.State.Opt) {
					t.Errorf("resumed after %d steps: %d steps, weights differ by %.3g from %d steps straight",
						n, got.Steps, numtest.MaxRelDiff(got.Params, want.Params), n+m)
				}
				if !reflect.DeepEqual(got.State.Position, want.State.Position) {
					t.Errorf("resumed run ends at %+v, straight at %+v", got.State.Position, want.State.Position)
				}
				if slices.Equal(a.Params, want.Params) {
					t.Error("the first part's weights equal the whole run's: the test proves nothing")
				}
			})
		}
	}
}

// TestResumeChecksState: a state of another model is refused.
func TestResumeChecksState(t *testing.T) {
	cfg := synthCfg()
	cfg.MaxSteps = 2
	st := *mustRun(t, 1, cfg)[0].State
	other := cfg
	other.Hidden = []int{16, 7}
	_, errs := runWorldFrom(t, 1, other, &st, nil)
	if errs[0] == nil {
		t.Fatal("resumed a [12 16 8 3] state into a [12 16 7 3] model")
	}
}

// TestResumeBatchNorm (issue 29): a TrainState carries the batch norms'
// running statistics: resumed from it, a network ends with the weights of
// the run straight through, bit for bit, and its statistics to rounding
// (the state keeps the ranks' average, which every rank resumes from).
func TestResumeBatchNorm(t *testing.T) {
	b := bnCfg()
	cfg := synthCfg()
	cfg.Model, cfg.Net, cfg.Data, cfg.Shuffle = b.Model, b.Net, b.Data, true
	straight := cfg
	straight.MaxSteps = 12
	want := mustRun(t, 2, straight)[0]
	first := cfg
	first.MaxSteps = 5
	a := mustRun(t, 2, first)[0]
	if len(a.State.Buffers) == 0 || !slices.Equal(a.State.Buffers, a.ModelState) {
		t.Fatalf("the state after 5 steps holds %d statistics, the result %d", len(a.State.Buffers), len(a.ModelState))
	}
	res, errs := runWorldFrom(t, 2, straight, a.State, nil)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	got := res[0]
	if !slices.Equal(got.Params, want.Params) {
		t.Errorf("weights differ by %.3g from 12 steps straight", numtest.MaxRelDiff(got.Params, want.Params))
	}
	if d := numtest.MaxRelDiff(got.ModelState, want.ModelState); len(got.ModelState) != len(want.ModelState) || d > 1e-7 {
		t.Errorf("batch-norm statistics differ by %.3g from 12 steps straight", d)
	}
	// Without them (a state from before they were kept) they start afresh
	// and end elsewhere: the check above is not vacuous.
	old := a.State.Clone()
	old.Buffers = nil
	res, errs = runWorldFrom(t, 2, straight, &old, nil)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if d := numtest.MaxRelDiff(res[0].ModelState, want.ModelState); d < 1e-3 {
		t.Errorf("resumed without statistics, they still end within %.3g of the straight run's", d)
	}
}

// TestTrainStateJSON: the one State inside TrainState keeps its JSON
// names (params, opt_state, model_state), those of the fields it replaced.
func TestTrainStateJSON(t *testing.T) {
	b, err := json.Marshal(TrainState{State: model.State{Params: []float32{1}, Opt: []float32{2}, Buffers: []float32{3}}, Position: Position{Epoch: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"params":[1]`, `"opt_state":[2]`, `"model_state":[3]`, `"epoch":1`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("%s lacks %s", b, k)
		}
	}
}
