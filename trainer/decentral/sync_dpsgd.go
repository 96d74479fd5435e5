package decentral

import (
	"fmt"
	"strings"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/trainer/config"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/engine"
	"github.com/dml-project/dml/trainer/gossip"
	"github.com/dml-project/dml/trainer/model"
	"github.com/dml-project/dml/trainer/trace"
)

// dpsgdStrategy is decentralized parallel SGD (D-PSGD; Lian et al.,
// "Can Decentralized Algorithms Outperform Centralized Algorithms?",
// NeurIPS'17, as the survey in the seeds describes it): every rank keeps
// its own model x_i. At step k each rank
//
//  1. sends x_i to its neighbours on the graph (--topology) and receives
//     theirs, while it computes its gradient g_i at x_i on its own batch;
//  2. mixes: x_i ← W_ii·x_i + Σ_j W_ij·x_j, W the Metropolis weights of
//     the graph (symmetric, doubly stochastic: gossip.Graph.Weights);
//  3. applies g_i to the mixed model with its own optimizer.
//
// There is no server and no global collective in a step: a rank talks to
// deg(G) neighbours only. Steps stay in lock step (each waits for its
// neighbours' models of the same step), so the run is deterministic.
// Each rank's gradient is the mean over its own batch: the average model
// then moves like one SGD step on the global batch.
//
// Departures from the paper: with a momentum or Adagrad optimizer each
// rank keeps its own optimizer state and applies it to the mixed model
// (the paper analyses plain SGD). The loss and accuracy printed per epoch
// are the reporting rank's own (ScopeWorker); the test accuracy is that of
// the consensus model x̄ (the average of every rank's model, computed at
// each evaluation without changing the ranks' models), and the final
// weights are x̄.
type dpsgdStrategy struct {
	*LocalModel
	graph gossip.Graph
	nbrs  []int
	self  float32
	w     []float32
	nb    [][]float32 // the neighbours' models of this step

	overlap bool       // exchange on a goroutine while the gradient is computed
	done    chan error // the goroutine's outcome
	waitSec float64    // this epoch's time waiting for neighbours
	mixes   int        // this epoch's averagings
	sent    int64      // bytes of models sent to neighbours

	xtr trace.Tracer // the exchange's spans: on the communication lane with overlap
}

// DPSGD is --sync dpsgd: every rank keeps its own model, averaged
// with its neighbours' at every step (dpsgdStrategy). Its checkpoints hold
// every rank's own model and optimizer state.
type DPSGD struct{ OwnModelUnit }

func (DPSGD) Help() string {
	return "each rank averages its model with its graph neighbours every step"
}
func (DPSGD) Variants() []engine.Variant { return engine.OneVariant(engine.SyncDPSGD) }

// Reshards: a checkpoint resumes on another number of ranks from the
// consensus model, with the ranks' optimizer states averaged
// (consensusState), the rest of its epoch dealt to them (reshard.go).
func (DPSGD) Reshards(engine.Config) bool { return true }

func (DPSGD) ValidateWorld(c engine.Config, size int) error {
	if _, err := gossip.New(c.Topology, size); err != nil {
		return config.Bad("Topology", "%v", err)
	}
	return nil
}

// Run: with SyncBN every rank's batch-norm statistics are summed over the
// ranks at each step (they step together: each averages with its
// neighbours after every step).
func (DPSGD) Run(j *engine.Job, d engine.DenseSetup) (*engine.Result, error) {
	if j.Cfg.SyncBN {
		d.M.SyncBN = func(v []float32) error { return collectives.Allreduce(j.Comm, v, collectives.Sum, collectives.Tree) }
		defer func() { d.M.SyncBN = nil }()
	}
	return Run(j, d, func() (GossipStrategy, error) { return newDPSGD(j, d.M, d.Params, d.Shard, d.TestShard) })
}

func newDPSGD(j *engine.Job, m *model.Model, params []float32, train, test *data.Dense) (*dpsgdStrategy, error) {
	g, err := gossip.New(j.Cfg.Topology, j.Comm.Size())
	if err != nil {
		return nil, err
	}
	l, err := NewLocalModel(j, m, train, test, params, true)
	if err != nil {
		return nil, err
	}
	r := j.Comm.Rank()
	// Under SyncBN the gradient's computation runs collectives on the
	// Comm, which one goroutine uses at a time: the exchange waits.
	s := &dpsgdStrategy{LocalModel: l, graph: g, nbrs: g.Adj[r], overlap: j.Cfg.Overlap && !j.Cfg.SyncBN, done: make(chan error, 1), xtr: j.Trace}
	if s.overlap {
		s.xtr = trace.OnLane(j.Trace, trace.LaneComm)
	}
	self, w := g.Weights(r)
	s.self = float32(self)
	for _, v := range w {
		s.w = append(s.w, float32(v))
		s.nb = append(s.nb, make([]float32, len(params)))
	}
	return s, nil
}

func (s *dpsgdStrategy) Local() *LocalModel { return s.LocalModel }
func (s *dpsgdStrategy) Close()             { s.Free() }

// sentBytes: the models sent to the neighbours.
func (s *dpsgdStrategy) sentBytes() int64 { return s.sent }

func (s *dpsgdStrategy) Hooks() engine.Hooks {
	h := s.LocalModel.Hooks()
	h.SentBytes = s.sentBytes
	return h
}

func (s *dpsgdStrategy) Describe() string {
	deg := make([]string, 0, 2)
	lo, hi := len(s.graph.Adj[0]), 0
	for _, adj := range s.graph.Adj {
		lo, hi = min(lo, len(adj)), max(hi, len(adj))
	}
	deg = append(deg, fmt.Sprint(lo))
	if hi != lo {
		deg = append(deg, fmt.Sprint(hi))
	}
	how := "after the gradient"
	switch {
	case s.overlap:
		how = "while the gradient is computed"
	case s.Job.Cfg.Overlap && s.Job.Cfg.SyncBN:
		how += " (--sync-bn's reductions use the connection while it is computed)"
	}
	return fmt.Sprintf("%s, dpsgd on a %v of %d ranks (%s neighbours each), models exchanged %s, backend %s",
		s.DescribeLocal(), s.Job.Cfg.Topology, s.graph.N, strings.Join(deg, "–"), how, kernels.Describe(s.Job.Backend))
}

// Prepare uploads the batch and, with overlap, starts the exchange of
// models with the neighbours (x is not written again before Exchange).
func (s *dpsgdStrategy) Prepare(idx []int, step int) error {
	err := s.LoadBatch(idx)
	if err == nil && s.overlap && len(s.nbrs) > 0 {
		go func() { s.done <- engine.Caught(func() error { return s.exchange(step) }) }()
	}
	return err
}

// exchange sends x to every neighbour and receives theirs into nb.
func (s *dpsgdStrategy) exchange(step int) error {
	c := s.Job.Comm
	collectives.EnterOp(c, "dpsgd exchange with neighbours")
	sp := s.xtr.Begin("gossip").Cat(trace.Collective).Bytes(4*len(s.X)*len(s.nbrs)).Arg("step", step)
	defer sp.End()
	reqs := make([]collectives.Request, 0, 2*len(s.nbrs))
	fail := func(what string, q int, err error) error {
		for _, r := range reqs {
			r.Wait()
		}
		err = fmt.Errorf("dpsgd step %d: %s rank %d: %w", step, what, q, err)
		sp.Err(err)
		return err
	}
	for k, q := range s.nbrs {
		r, err := c.Irecv(s.nb[k], q, tagGossip)
		if err != nil {
			return fail("receiving the model of neighbour", q, err)
		}
		reqs = append(reqs, r)
	}
	for _, q := range s.nbrs {
		s.sent += 4 * int64(len(s.X))
		r, err := c.Isend(s.X, q, tagGossip)
		if err != nil {
			return fail("sending the model to neighbour", q, err)
		}
		reqs = append(reqs, r)
	}
	for i, r := range reqs {
		if err := r.Wait(); err != nil {
			reqs = reqs[i+1:]
			if i < len(s.nbrs) {
				return fail("receiving the model of neighbour", s.nbrs[i], err)
			}
			return fail("sending the model to neighbour", s.nbrs[i-len(s.nbrs)], err)
		}
	}
	return nil
}

// Exchange waits for the neighbours' models, mixes, and applies the
// gradient to the mixed model.
func (s *dpsgdStrategy) Exchange(step int) (engine.StepStats, error) {
	t0 := time.Now()
	var err error
	switch {
	case len(s.nbrs) == 0:
	case s.overlap:
		sp := s.Job.Trace.Begin("wait-neighbours").Cat(trace.Wait)
		err = <-s.done
		sp.End()
	default:
		err = s.exchange(step)
	}
	wait := time.Since(t0).Seconds()
	if err != nil {
		return engine.StepStats{}, err
	}
	st, err := s.StepStats(s.N)
	if err != nil {
		return engine.StepStats{}, err
	}
	st.CommSec = wait
	s.waitSec += wait
	if len(s.nbrs) > 0 {
		s.mix()
		s.mixes++
	}
	return st, s.Update()
}

// mix sets x ← W_ii·x + Σ_k w_k·nb_k, summing in the neighbours' order
// (the same on every run: deterministic).
func (s *dpsgdStrategy) mix() {
	x, self := s.X, s.self
	switch len(s.nb) {
	case 1:
		a, wa := s.nb[0], s.w[0]
		for i := range x {
			x[i] = self*x[i] + wa*a[i]
		}
	case 2:
		a, b, wa, wb := s.nb[0], s.nb[1], s.w[0], s.w[1]
		for i := range x {
			x[i] = self*x[i] + wa*a[i] + wb*b[i]
		}
	default:
		for i := range x {
			v := self * x[i]
			for k, nb := range s.nb {
				v += s.w[k] * nb[i]
			}
			x[i] = v
		}
	}
}

// EndEpoch: the job's samples/s (summed over ranks: the loop measured
// this rank's), the mean share of step time spent waiting for neighbours,
// the consensus distance, and the reporting rank's averaging figures.
func (s *dpsgdStrategy) EndEpoch(st *engine.EpochStats, commSec, stepSec, wallSec float64) error {
	err := s.FillEpoch(st, commSec, stepSec, wallSec, s.mixes, s.waitSec)
	s.mixes, s.waitSec = 0, 0
	return err
}

// Evaluate measures the consensus model EndEpoch averaged.
func (s *dpsgdStrategy) Evaluate() (engine.EvalResult, error) { return s.EvaluateConsensus() }
