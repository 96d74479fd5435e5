package decentral

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
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

// adpsgdStrategy is asynchronous decentralized parallel SGD (AD-PSGD;
// Lian et al., ICML'18, as the survey in the seeds gives it): every rank
// keeps its own model x_i and loops with no barrier:
//
//  1. takes a batch and computes its gradient at x̂_i, the model as it was
//     when the step began;
//  2. averages x_i with one random neighbour j: both end with
//     (x_i + x_j)/2, atomically (nothing else writes either model between
//     the read and the write of the average);
//  3. applies its gradient: x_i ← x_i − γ·g(x̂_i).
//
// Deadlock avoidance (the survey's "Prevention"): the graph is bipartite
// (gossip.Bipartite). Active ranks (even) start every averaging, in step 2
// of their own loop, with a random passive neighbour, overlapped with
// step 1 (non-blocking send and receive posted before the gradient). Passive
// ranks (odd) never start one: a goroutine of theirs answers requests at
// any time, also while their own gradient is computed (so a slow passive
// rank slows only its partners' averagings by a message time, not by its
// computation), and never waits for another averaging while it answers.
// A passive rank's x is read and written under a lock (its answers and its
// own updates); its gradient is computed at a copy (x̂).
//
// How much is trained: faster ranks run more steps, as in the paper (its
// p_i). The job trains Epochs × the training set's size samples in all,
// counted by rank 0 from the progress each rank reports after its steps
// (--max-steps caps the steps of all ranks together); each rank walks its
// own shard in its own epochs. When the count passes an epoch's worth,
// rank 0 calls a synchronisation point: every rank finishes its current
// step, the active ranks tell their partners they pause (so that no
// averaging is in flight), and all ranks average their models into the
// consensus model x̄ (evaluated, printed; the ranks' own models are left
// as they are) before they go on. That costs each rank at most one of the
// slowest rank's steps per epoch; it is where this departs from the paper,
// which evaluates offline. The final weights are x̄ at the last point.
// The count is not exact: rank 0 reads the reports between its own
// steps, and every rank finishes the step it is in (a passive rank starts
// none once its server has the call). An epoch that runs over leaves the
// next one fewer samples, so only the last point's overshoot adds to the
// total: the steps reported while rank 0 computed its last one, and
// those in flight (unless an epoch is shorter than the overshoot, and
// every rank steps once after each point: then each epoch runs over).
// An exact total would need a quota per rank, which makes fast ranks
// wait (as --max-steps does).
//
// Bounded lag (a departure): a passive rank runs at most maxLag steps
// past its last averaging, then waits for an active neighbour to average
// with it. In the paper's setting every worker runs at about the same
// speed, so a passive one is averaged about once per step; in-process
// tests, where one goroutine may run far ahead of the others, showed
// passive models drifting apart from the rest (consensus distance above
// 1, the consensus model at chance). The wait only ever holds up the
// passive rank itself: its active neighbours never wait on its steps.
//
// Not reproducible: the order in which averagings and updates interleave
// depends on timing, so two runs with the same seed differ (the random
// partner choices themselves are seeded).
type adpsgdStrategy struct {
	*LocalModel
	// resumed is, on rank 0, every rank's steps before the checkpoint
	// this run resumed from (added to the totals only).
	resumed int
	graph   gossip.Bipartite
	active  bool
	nbrs    []int
	rng     *rand.Rand
	step    int // steps run by this rank
	// quota is this rank's share of --max-steps (what is left of it after
	// a resume), < 0 without a cap; quotaPaused says an active rank at it
	// told its partners so in this epoch (quota.go).
	quota       int
	quotaPaused bool
	// nbrsPaused: on a passive rank, every active neighbour has paused at
	// its quota: none will average with it before the final point.
	nbrsPaused atomic.Bool
	// called: on a passive rank, rank 0 has called the next point; the
	// rank takes no further step before it (its steps would overshoot
	// the epoch's samples while its server waits for the pauses).
	called atomic.Bool

	// active ranks
	peer    int
	theirs  []float32 // the partner's model, as it answered
	overlap bool      // average on a goroutine while the gradient is computed
	avgDone chan error
	avgErr  error   // the averaging's outcome (without overlap)
	avgSec  float64 // its time (without overlap)

	avgTr trace.Tracer // average's spans: on the communication lane with overlap

	// passive ranks
	mu     sync.Mutex // guards x (and the optimizer update of it)
	srv    *passiveServer
	srvErr chan error

	// progress since the last report (rank 0 adds its own directly)
	steps, samples atomic.Int64
	// rank 0: what every rank reported, and the next point
	clock *gossip.EpochClock

	// lag counts a passive rank's steps since its last averaging (see
	// maxLag); averaged wakes a passive rank that waits for one.
	lag      atomic.Int64
	averaged chan struct{}

	averagings atomic.Int64 // this epoch's averagings (started or answered)
	waitSec    float64      // this epoch's time waiting for partners
	seen       float64      // this epoch's samples on this rank
}

// Control message kinds (tagGossipCtl), as 4 little-endian uint64s:
// kind, then two arguments, then the sender's step (checked nowhere, for
// a person reading a trace).
// Their kinds are the protocol's (gossip.MsgRequest, …).
const (
	msgRequest  = gossip.MsgRequest
	msgProgress = gossip.MsgProgress
	msgSync     = gossip.MsgSync
	msgPause    = gossip.MsgPause
)

const ctlLen = 32

func putCtl(buf []byte, kind, a, b, step int64) []byte {
	buf = buf[:ctlLen]
	for i, v := range []int64{kind, a, b, step} {
		binary.LittleEndian.PutUint64(buf[8*i:], uint64(v))
	}
	return buf
}

func getCtl(msg []byte) (kind, a, b int64, err error) {
	if len(msg) != ctlLen {
		return 0, 0, 0, fmt.Errorf("adpsgd: control message of %d bytes, want %d", len(msg), ctlLen)
	}
	kind = int64(binary.LittleEndian.Uint64(msg))
	a = int64(binary.LittleEndian.Uint64(msg[8:]))
	b = int64(binary.LittleEndian.Uint64(msg[16:]))
	if kind < msgRequest || kind > msgPause {
		return 0, 0, 0, fmt.Errorf("adpsgd: control message of unknown kind %d", kind)
	}
	return kind, a, b, nil
}

// ADPSGD is --sync adpsgd: no barrier, pairwise averaging on a
// bipartite graph (adpsgdStrategy). Its ranks share no step boundary: it
// paces its own epochs (pacer), takes no stop signal at boundaries, and
// writes its checkpoints at its synchronisation points (loop.go).
type ADPSGD struct{ OwnModelUnit }

func (ADPSGD) Help() string               { return "asynchronous pairwise averaging, no barrier; 2+ ranks" }
func (ADPSGD) StopsAtBoundaries() bool    { return false }
func (ADPSGD) Variants() []engine.Variant { return engine.OneVariant(engine.SyncADPSGD) }

// Validate: SyncBN needs a step all ranks take together, which adpsgd's
// ranks never do.
func (ADPSGD) Validate(c engine.Config) error {
	if c.SyncBN {
		return config.Bad("SyncBN", "needs a step all ranks take together: adpsgd's ranks share none (use --sync allreduce, dpsgd, or ps with --consistency bsp)")
	}
	return nil
}

func (ADPSGD) ValidateWorld(c engine.Config, size int) error {
	if _, err := gossip.NewBipartite(c.Topology, size); err != nil {
		return config.Bad("Sync", "adpsgd: %v", err)
	}
	return nil
}

// CheckCheckpointing: the ranks share no step boundary; they meet at the
// synchronisation points, where the checkpoints are written (every
// --checkpoint-every Ne epochs, and at the end).
func (ADPSGD) CheckCheckpointing(c engine.Config, ck *engine.Checkpointing) error {
	if ck.Every > 0 {
		return config.Bad("Checkpoint", "%v writes checkpoints at its synchronisation points, the ends of epochs (its ranks share no step boundary): give an epoch schedule (--checkpoint-every %de)", c.Sync, max(1, ck.Every/1000))
	}
	return nil
}

// Reshards: a checkpoint is written at a synchronisation point, an epoch's
// end; on another number of ranks every rank starts from the consensus
// model with the ranks' optimizer states averaged (consensusState), as
// under dpsgd.
func (ADPSGD) Reshards(engine.Config) bool { return true }

func (ADPSGD) Run(j *engine.Job, d engine.DenseSetup) (*engine.Result, error) {
	return Run(j, d, func() (GossipStrategy, error) { return newADPSGD(j, d.M, d.Params, d.Shard, d.TestShard) })
}

func newADPSGD(j *engine.Job, m *model.Model, params []float32, train, test *data.Dense) (*adpsgdStrategy, error) {
	r := j.Comm.Rank()
	g, err := gossip.NewBipartite(j.Cfg.Topology, j.Comm.Size())
	if err != nil {
		return nil, err
	}
	l, err := NewLocalModel(j, m, train, test, params, false)
	if err != nil {
		return nil, err
	}
	s := &adpsgdStrategy{LocalModel: l, graph: g, active: g.Active(r), nbrs: g.Adj[r],
		rng: rand.New(rand.NewPCG(j.Cfg.Seed, uint64(r)+0x9E3779B97F4A7C15)), averaged: make(chan struct{}, 1),
		clock: gossip.NewEpochClock(j.Sched.N, j.Cfg.Epochs, j.Cfg.MaxSteps)}
	done := 0
	if r := j.Resume; r != nil {
		// From a synchronisation point's checkpoint: the epochs before it
		// are done, and its steps (every rank's) count towards
		// --max-steps; rank 0 carries them in the total.
		s.clock.ResumeAt(r.Epoch, int64(r.Steps))
		if j.Comm.Rank() == 0 {
			s.resumed = r.Steps
		}
		done = r.Steps
	}
	s.quota = stepQuota(j.Cfg.MaxSteps, done, j.Comm.Rank(), j.Comm.Size())
	s.theirs = make([]float32, len(params))
	s.overlap, s.avgDone, s.avgTr = j.Cfg.Overlap, make(chan error, 1), j.Trace
	if s.overlap {
		s.avgTr = trace.OnLane(j.Trace, trace.LaneComm)
	}
	if !s.active {
		s.srv = newPassiveServer(s)
		s.srvErr = make(chan error, 1)
		go func() { s.srvErr <- engine.Caught(s.srv.run) }()
	}
	return s, nil
}

func (s *adpsgdStrategy) Local() *LocalModel { return s.LocalModel }

func (s *adpsgdStrategy) Close() {
	if s.srv != nil {
		// MPI is finalised after Close: the server must be out of its
		// receive by then (a resumed job that had already finished went
		// from here to MPI_Finalize while it polled, and crashed). It
		// looks at quit at least every pollEvery.
		s.srv.stop()
		select {
		case <-s.srvErr:
		case <-time.After(s.timeout()):
		}
		s.srv = nil
	}
	s.Free()
}

// Hooks: the local model's, and the pace of the ranks' own steps.
func (s *adpsgdStrategy) Hooks() engine.Hooks {
	h := s.LocalModel.Hooks()
	h.Pace = s
	return h
}

func (s *adpsgdStrategy) Describe() string {
	na := 0
	for r := range s.graph.N {
		if s.graph.Active(r) {
			na++
		}
	}
	return fmt.Sprintf("%s, adpsgd on a bipartite %v of %d ranks (%d active, %d passive), no barrier, backend %s",
		s.DescribeLocal(), s.Job.Cfg.Topology, s.graph.N, na, s.graph.N-na, kernels.Describe(s.Job.Backend))
}

// Prepare uploads the batch and, on an active rank, averages (or starts
// averaging) with a random passive neighbour (x is the model the gradient
// is computed at: Params holds it since the last update). On a passive rank it copies
// x, which its server may change at any time, into Params (x̂).
func (s *adpsgdStrategy) Prepare(idx []int, step int) error {
	if err := s.LoadBatch(idx); err != nil {
		return err
	}
	if !s.active {
		s.mu.Lock()
		err := s.Job.Backend.Upload(s.M.Params, s.X)
		s.mu.Unlock()
		return err
	}
	s.peer = s.nbrs[s.rng.IntN(len(s.nbrs))]
	if s.overlap {
		go func() { s.avgDone <- engine.Caught(func() error { return s.average(s.peer) }) }()
		return nil
	}
	t0 := time.Now()
	s.avgErr = s.average(s.peer)
	s.avgSec = time.Since(t0).Seconds()
	return nil
}

// average sends x to passive rank peer and receives its model into
// theirs: the message half of an averaging (Exchange does the arithmetic).
// It runs while the gradient is computed, on a goroutine of its own with
// --overlap (which keeps MPI progressing both transfers: a rank busy
// computing does not, and a large message needs both sides), or before
// the gradient otherwise; either way it holds the partner's server only
// for the two transfers, never for this rank's computation.
func (s *adpsgdStrategy) average(peer int) error {
	c := s.Job.Comm
	collectives.EnterOp(c, "adpsgd averaging")
	sp := s.avgTr.Begin("average").Cat(trace.Collective).Bytes(8*len(s.X)).Arg("partner", peer)
	defer sp.End()
	var hdr [ctlLen]byte
	if err := c.SendBytes(putCtl(hdr[:], msgRequest, int64(len(s.X)), 0, int64(s.step)), peer, tagGossipCtl); err != nil {
		return fmt.Errorf("adpsgd: asking passive rank %d to average: %w", peer, err)
	}
	recv, err := c.Irecv(s.theirs, peer, tagGossipModel)
	if err != nil {
		return fmt.Errorf("adpsgd: receiving the model of passive rank %d: %w", peer, err)
	}
	errS := collectives.Send(c, s.X, peer, tagGossipModel)
	errR := recv.Wait()
	if err := errors.Join(errS, errR); err != nil {
		return fmt.Errorf("adpsgd: averaging with passive rank %d: %w", peer, err)
	}
	return nil
}

// Exchange finishes the averaging (active ranks) and applies the gradient
// to the model as it is now.
func (s *adpsgdStrategy) Exchange(step int) (engine.StepStats, error) {
	t0 := time.Now()
	wait := 0.0
	if s.active {
		err := s.avgErr
		if s.overlap {
			sp := s.Job.Trace.Begin("wait-partner").Cat(trace.Wait).Arg("partner", s.peer)
			err = <-s.avgDone
			sp.End()
			wait = time.Since(t0).Seconds()
		} else {
			wait = s.avgSec
		}
		if err != nil {
			return engine.StepStats{}, err
		}
		gossip.AverageInto(s.X, s.theirs)
		s.averagings.Add(1)
	}
	s.waitSec += wait
	st, err := s.StepStats(s.N)
	if err != nil {
		return engine.StepStats{}, err
	}
	st.CommSec = wait
	if !s.active {
		s.lag.Add(1)
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	s.step++
	return st, s.Update()
}

// Evaluate measures the consensus model of the last synchronisation point.
func (s *adpsgdStrategy) Evaluate() (engine.EvalResult, error) { return s.EvaluateConsensus() }

// Stepped counts a finished step for the next progress report, and its
// samples for the epoch's figures.
func (s *adpsgdStrategy) Stepped(samples float64) {
	s.seen += samples
	s.steps.Add(1)
	s.samples.Add(int64(samples))
}

// ResumeAfter lets a passive rank's server go on answering (or, after the
// final point, end).
func (s *adpsgdStrategy) ResumeAfter(pt *gossip.Point) {
	s.quotaPaused = false
	s.called.Store(false)
	if s.srv != nil {
		s.srv.resume(pt.Final)
	}
}

// TotalSteps: the ranks run different numbers of steps; Result.Steps is
// their sum.
func (s *adpsgdStrategy) TotalSteps(int) (int, error) {
	tot := []float32{float32(s.step + s.resumed)}
	if err := collectives.Allreduce(s.Job.Comm, tot, collectives.Sum, collectives.Tree); err != nil {
		return 0, err
	}
	return int(tot[0]), nil
}

// SyncPoint is what a rank does between two steps: report its progress
// and learn whether rank 0 called a synchronisation point (nil: go on). A
// rank that has run its share of --max-steps waits here for the point.
func (s *adpsgdStrategy) SyncPoint() (*gossip.Point, error) {
	if !s.active {
		return s.passiveBoundary()
	}
	if err := s.pauseAtQuota(); err != nil {
		return nil, err
	}
	var pt *gossip.Point
	var err error
	if s.Job.Comm.Rank() == 0 {
		pt, err = s.callPoint()
	} else {
		pt, err = s.awaitPoint()
	}
	if err != nil || pt == nil || s.quotaPaused {
		return pt, err
	}
	// No averaging of ours is in flight between steps: tell our partners,
	// so that they stop answering once all have said so (a rank at its
	// quota has told them already).
	return pt, s.pausePartners(pt.Epoch, false)
}

// callPoint is rank 0's side of SyncPoint: take every progress report
// that has arrived, then call the point that is due, if any, at every
// rank. At its quota it waits for reports until one is due.
func (s *adpsgdStrategy) callPoint() (*gossip.Point, error) {
	c := s.Job.Comm
	wait := time.Duration(0)
	for {
		for {
			msg, src, _, err := c.RecvBytesWithin(collectives.AnySource, tagGossipCtl, wait)
			if errors.Is(err, collectives.ErrTimeout) {
				if wait > 0 {
					return nil, s.quotaTimeout("no rank reported progress")
				}
				break
			}
			if err != nil {
				return nil, err
			}
			kind, a, b, err := getCtl(msg)
			if err != nil || kind != msgProgress {
				return nil, fmt.Errorf("adpsgd: rank 0 got kind %d from rank %d, want a progress report: %v", kind, src, err)
			}
			s.clock.Report(a, b)
			wait = 0 // then whatever else has arrived
		}
		s.clock.Report(s.steps.Swap(0), s.samples.Swap(0))
		pt := s.clock.Due()
		if pt == nil && s.atQuota() {
			wait = s.timeout()
			continue
		}
		if pt != nil {
			var hdr [ctlLen]byte
			fin := int64(0)
			if pt.Final {
				fin = 1
			}
			for r := 1; r < c.Size(); r++ {
				if err := c.SendBytes(putCtl(hdr[:], msgSync, int64(pt.Epoch), fin, int64(s.step)), r, tagGossipCtl); err != nil {
					return nil, fmt.Errorf("adpsgd: calling synchronisation point %d at rank %d: %w", pt.Epoch, r, err)
				}
			}
		}
		return pt, nil
	}
}

// awaitPoint is an active rank's side of SyncPoint (not rank 0's): report
// its steps, and take the point rank 0 called, if any (at its quota, wait
// for it).
func (s *adpsgdStrategy) awaitPoint() (*gossip.Point, error) {
	c := s.Job.Comm
	var hdr [ctlLen]byte
	if n := s.steps.Swap(0); n > 0 {
		if err := c.SendBytes(putCtl(hdr[:], msgProgress, n, s.samples.Swap(0), int64(s.step)), 0, tagGossipCtl); err != nil {
			return nil, fmt.Errorf("adpsgd: reporting progress to rank 0: %w", err)
		}
	}
	wait := time.Duration(0)
	if s.atQuota() {
		wait = s.timeout()
	}
	msg, _, _, err := c.RecvBytesWithin(0, tagGossipCtl, wait)
	if errors.Is(err, collectives.ErrTimeout) {
		if wait > 0 {
			return nil, s.quotaTimeout("rank 0 called no synchronisation point")
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	kind, a, b, err := getCtl(msg)
	if err != nil || kind != msgSync {
		return nil, fmt.Errorf("adpsgd: rank %d got kind %d from rank 0, want a synchronisation point: %v", c.Rank(), kind, err)
	}
	return &gossip.Point{Epoch: int(a), Final: b != 0}, nil
}

// pausePartners tells this active rank's passive partners that it will
// not average with them until the ranks resume (spent: because it has
// run its share of --max-steps).
func (s *adpsgdStrategy) pausePartners(epoch int, spent bool) error {
	var hdr [ctlLen]byte
	b := int64(0)
	if spent {
		b = 1
	}
	for _, p := range s.nbrs {
		if err := s.Job.Comm.SendBytes(putCtl(hdr[:], msgPause, int64(epoch), b, int64(s.step)), p, tagGossipCtl); err != nil {
			return fmt.Errorf("adpsgd: pausing passive rank %d: %w", p, err)
		}
	}
	return nil
}

// passiveBoundary is boundary on a passive rank, whose server reports the
// progress and receives rank 0's call: it returns the point the server
// parked for, if any. A rank maxLag steps past its last averaging waits
// here until an active neighbour averages with it (or a point comes).
func (s *adpsgdStrategy) passiveBoundary() (*gossip.Point, error) {
	stopped := func(err error) error {
		s.srv = nil
		if err == nil {
			err = errors.New("adpsgd: the passive server stopped")
		}
		return err
	}
	if s.atQuota() || s.called.Load() {
		select {
		case err := <-s.srvErr:
			return nil, stopped(err)
		case pt := <-s.srv.ready:
			return pt, nil
		case <-time.After(s.timeout()):
			if s.atQuota() {
				return nil, s.quotaTimeout("no synchronisation point came")
			}
			return nil, fmt.Errorf("adpsgd: passive rank %d: rank 0 called a synchronisation point, and its active neighbours (ranks %v) did not all pause for it in %v (Config.Timeout)", s.Job.Comm.Rank(), s.nbrs, s.timeout())
		}
	}
	if s.lag.Load() < maxLag || s.nbrsPaused.Load() {
		select {
		case err := <-s.srvErr:
			return nil, stopped(err)
		case pt := <-s.srv.ready:
			return pt, nil
		default:
			return nil, nil
		}
	}
	timeout := s.timeout()
	sp := s.Job.Trace.Begin("wait-average").Cat(trace.Wait)
	defer sp.End()
	until := time.After(timeout)
	for s.lag.Load() >= maxLag && !s.nbrsPaused.Load() {
		select {
		case err := <-s.srvErr:
			return nil, stopped(err)
		case pt := <-s.srv.ready:
			return pt, nil
		case <-s.averaged:
		case <-until:
			return nil, fmt.Errorf("adpsgd: passive rank %d: no active neighbour (ranks %v) averaged with it for %v (Config.Timeout)", s.Job.Comm.Rank(), s.nbrs, timeout)
		}
	}
	return nil, nil
}

// EndEpoch is a synchronisation point on every rank (the passive servers
// are parked until resumeAfter): the consensus model, and the epoch's
// figures from every rank's since the last point.
func (s *adpsgdStrategy) EndEpoch(st *engine.EpochStats, commSec, stepSec, wall float64) error {
	j := s.Job
	collectives.EnterOp(j.Comm, "adpsgd synchronisation point")
	sp := j.Trace.Begin("synchronise").Cat(trace.Wait).Arg("epoch", st.Epoch)
	defer sp.End()
	dist, err := s.consensus()
	if err != nil {
		return err
	}
	fr := []float32{float32(s.seen), float32(commSec), float32(stepSec)}
	s.seen = 0
	if err := collectives.Allreduce(j.Comm, fr, collectives.Sum, collectives.Tree); err != nil {
		return err
	}
	n := float64(j.Comm.Size())
	st.Steps = s.step // this rank's, since the start
	st.SamplesPerSec = float64(fr[0]) / wall
	st.CommFraction = float64(fr[1]) / n / math.Max(float64(fr[2])/n, 1e-12)
	avgs := s.averagings.Swap(0)
	st.GossipStats = &engine.GossipStats{Consensus: dist, Averagings: int(avgs), AveragingsPerSec: float64(avgs) / wall, PartnerWaitSec: s.waitSec}
	s.waitSec = 0
	return nil
}

// passiveServer answers a passive rank's averaging requests on a
// goroutine of its own, which owns the Comm while the rank trains (MPI is
// used by one goroutine at a time): it also forwards the rank's progress
// to rank 0 and, at a synchronisation point, parks (once rank 0 called it
// and every active neighbour paused) and hands the Comm to the rank's
// loop until resume.
type passiveServer struct {
	s        *adpsgdStrategy
	ready    chan *gossip.Point
	resumeCh chan bool
	quit     chan struct{}
	mine     []float32    // x as it was, sent back to the partner
	in       []float32    // the partner's model
	tr       trace.Tracer // on the server lane
}

// maxLag is how many steps a passive rank may run without being averaged.
const maxLag = 4

// pollEvery is how long the server waits for a message before it looks
// at its progress counters and its partners' silence again.
const pollEvery = 2 * time.Millisecond

func newPassiveServer(s *adpsgdStrategy) *passiveServer {
	p := &passiveServer{s: s, ready: make(chan *gossip.Point, 1), resumeCh: make(chan bool, 1), quit: make(chan struct{}),
		mine: make([]float32, len(s.X)), in: make([]float32, len(s.X)), tr: trace.OnLane(s.Job.Trace, trace.LaneServer)}
	return p
}

func (p *passiveServer) resume(final bool) { p.resumeCh <- final }

// stop ends a server the loop no longer needs (an error path): it stops
// at its next poll.
func (p *passiveServer) stop() {
	select {
	case <-p.quit:
	default:
		close(p.quit)
	}
}

func (p *passiveServer) run() error {
	s := p.s
	c := s.Job.Comm
	ctl := gossip.NewPassiveControl(c.Rank(), s.nbrs, len(p.in), s.timeout(), time.Now())
	var hdr [ctlLen]byte
	for {
		select {
		case <-p.quit:
			return nil
		default:
		}
		if n := s.steps.Swap(0); n > 0 {
			if err := c.SendBytes(putCtl(hdr[:], msgProgress, n, s.samples.Swap(0), 0), 0, tagGossipCtl); err != nil {
				return fmt.Errorf("adpsgd: reporting progress to rank 0: %w", err)
			}
		}
		if pt := ctl.Ready(); pt != nil {
			p.ready <- pt
			select {
			case final := <-p.resumeCh:
				if final {
					return nil
				}
			case <-p.quit:
				return nil
			}
			ctl.Resumed(time.Now())
			s.nbrsPaused.Store(false)
			continue
		}
		msg, src, _, err := c.RecvBytesWithin(collectives.AnySource, tagGossipCtl, pollEvery)
		if errors.Is(err, collectives.ErrTimeout) {
			if err := ctl.Idle(time.Now()); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		kind, a, b, err := getCtl(msg)
		if err != nil {
			return fmt.Errorf("from rank %d: %w", src, err)
		}
		answer, err := ctl.Message(time.Now(), src, kind, a, b)
		if err != nil {
			return err
		}
		if ctl.Called() {
			s.called.Store(true)
		}
		if ctl.AllSpent() && !s.nbrsPaused.Swap(true) {
			select { // wake a rank waiting for an averaging (passiveBoundary)
			case s.averaged <- struct{}{}:
			default:
			}
		}
		if answer {
			if err := p.answer(src); err != nil {
				return err
			}
		}
	}
}

// answer averages x with the model active rank `from` sends: the reply is
// x as it was, and x becomes (x + theirs)/2, under the lock, so that the
// rank's own update never falls between the read and the write.
func (p *passiveServer) answer(from int) error {
	s := p.s
	c := s.Job.Comm
	collectives.EnterOp(c, "adpsgd answer")
	sp := p.tr.Begin("answer").Cat(trace.Collective).Bytes(8*len(p.in)).Arg("partner", from)
	defer sp.End()
	if err := collectives.Recv(c, p.in, from, tagGossipModel); err != nil {
		return fmt.Errorf("adpsgd: receiving the model of active rank %d: %w", from, err)
	}
	s.mu.Lock()
	copy(p.mine, s.X)
	gossip.AverageInto(s.X, p.in)
	s.lag.Store(0)
	s.mu.Unlock()
	select {
	case s.averaged <- struct{}{}:
	default:
	}
	if err := collectives.Send(c, p.mine, from, tagGossipModel); err != nil {
		return fmt.Errorf("adpsgd: answering active rank %d: %w", from, err)
	}
	s.averagings.Add(1)
	return nil
}

// atQuota says this rank has run its share of --max-steps.
func (s *adpsgdStrategy) atQuota() bool { return s.quota >= 0 && s.step >= s.quota }

// Spent is atQuota, for the loop (engine.Pacer).
func (s *adpsgdStrategy) Spent() bool { return s.atQuota() }

// pauseAtQuota tells an active rank's partners, once an epoch, that it has
// run its share and will not average again before the point.
func (s *adpsgdStrategy) pauseAtQuota() error {
	if !s.atQuota() || s.quotaPaused {
		return nil
	}
	s.quotaPaused = true
	return s.pausePartners(0, true)
}

// timeout is Config.Timeout, or the default where it is 0: how long a
// rank at its quota waits for the others (and rank 0 for a report), a
// passive rank for an averaging, its server for a silent neighbour.
func (s *adpsgdStrategy) timeout() time.Duration {
	if t := s.Job.Cfg.Timeout; t > 0 {
		return t
	}
	return engine.DefaultConfig().Timeout
}

func (s *adpsgdStrategy) quotaTimeout(what string) error {
	return fmt.Errorf("adpsgd: rank %d has run its %d of --max-steps, and %s for %v (Config.Timeout): a rank stopped, or its share takes longer than that (raise Config.Timeout)",
		s.Job.Comm.Rank(), s.quota, what, s.timeout())
}
