package trainer

import (
	"fmt"
	"math"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/data"
)

// PSStats is what parameter-server workers measured: per epoch for the
// reporting worker (EpochStats) or for the whole run over all workers
// (Result.PS).
type PSStats struct {
	MaxStaleness  int     `json:"max_staleness"`  // largest staleness seen at a pull
	StalenessHist []int   `json:"staleness_hist"` // [s] = pulls that saw staleness s
	WaitSec       float64 `json:"wait_sec"`       // time blocked in Pull and Push
	PushesPerSec  float64 `json:"pushes_per_sec"`
	PullsPerSec   float64 `json:"pulls_per_sec"`
	BytesSent     int64   `json:"bytes_sent"` // all request bytes
	// PushBytes is what the pushes took on the wire after the filters,
	// PushBytesUnfiltered what they would have taken without them.
	PushBytes           int64 `json:"push_bytes"`
	PushBytesUnfiltered int64 `json:"push_bytes_unfiltered"`
}

// psConfig turns the job's settings into package ps's.
func (c Config) psConfig() (ps.Config, error) {
	cons, err := ps.ParseConsistency(c.PS.Consistency)
	if err != nil {
		return ps.Config{}, err
	}
	opt, err := ps.ParseOptimizer(c.Opt.Name)
	if err != nil {
		return ps.Config{}, err
	}
	filters, err := ps.ParseFilters(c.PS.Filters)
	if err != nil {
		return ps.Config{}, err
	}
	return ps.Config{
		Servers: c.PS.Servers, Consistency: cons, Staleness: c.PS.Staleness,
		StalenessLow: c.PS.StalenessLow, StalenessHigh: c.PS.StalenessHigh,
		Optimizer: opt, LR: c.Opt.LR, Momentum: c.Opt.Momentum, WeightDecay: c.Opt.WeightDecay, Eps: c.Opt.Eps,
		Timeout: c.Timeout, Filters: filters,
	}, nil
}

// loopPS is training through the parameter server: ranks below Servers
// serve their key ranges (starting from params) until every worker is done,
// the workers train with stepper. Then every rank takes the final weights
// from the servers into params, evaluates them together with evalAll, and
// the reporting worker saves them.
func (r *run) loopPS(arch Arch, params []float32, stepper psStepper, evalAll func([]float32) (float64, error)) (*Result, error) {
	cfg, c := r.cfg, r.Comm
	start := time.Now()
	pcfg, err := cfg.psConfig()
	if err != nil {
		return nil, err
	}
	res := &Result{Arch: arch, TestAcc: math.NaN()}
	var ws ps.WorkerStats
	samples := 0.0
	if c.Rank() < cfg.PS.Servers {
		st, err := ps.RunServer(c, pcfg, params)
		if err != nil {
			return nil, err
		}
		copy(params[st.Range.Lo:st.Range.Hi], st.Weights)
	} else {
		r.printf("training %s %v on %d samples: %d workers × batch %d, %d server(s), %s, %s server-side\n",
			cfg.Model, arch.Sizes, r.nTrain, r.nAll, cfg.Batch, cfg.PS.Servers, consistencyLabel(cfg.PS), cfg.Opt.Name)
		if ws, samples, err = r.workPS(pcfg, len(params), stepper, res); err != nil {
			return nil, err
		}
	}
	for s, rng := range ps.Partition(len(params), cfg.PS.Servers) {
		if err := collectives.Broadcast(c, params[rng.Lo:rng.Hi], s); err != nil {
			return nil, fmt.Errorf("collecting the final weights from server rank %d: %w", s, err)
		}
	}
	if res.TestAcc, err = evalAll(params); err != nil {
		return nil, err
	}
	if res.PS, res.SamplesPerSec, err = r.runStats(ws, samples, time.Since(start)); err != nil {
		return nil, err
	}
	res.Params = params
	res.WallSec = time.Since(start).Seconds()
	return res, r.finish(res)
}

// evalAll uploads params into the dense model and measures the test set
// over every rank.
func (r *run) evalAll(params []float32) (float64, error) {
	if err := r.Backend.Upload(r.model.Params, params); err != nil {
		return 0, err
	}
	return r.evaluate()
}

// psStepper is what a model does in one parameter-server step and at the
// end of an epoch; workPS runs the loop around it.
type psStepper interface {
	// step pulls what it needs, computes the gradient of its samples idx
	// (times scale) and pushes it. It returns the summed loss and correct
	// count of the samples and the seconds spent waiting in Pull and Push.
	step(w *ps.Worker, idx []int, scale float32) (lossSum float64, correct int, waitSec float64, err error)
	// testAccuracy measures the whole test set with the worker's current view
	// of the weights (the reporting worker, at the end of an epoch).
	testAccuracy(w *ps.Worker) (float64, error)
}

// denseStepper trains a dense Model: pull all weights, compute on the
// backend, push the whole gradient.
type denseStepper struct {
	r      *run
	params []float32
}

func (d *denseStepper) step(w *ps.Worker, idx []int, scale float32) (float64, int, float64, error) {
	r, b, m := d.r, d.r.Backend, d.r.model
	np := m.Arch.NumParams()
	tw := time.Now()
	if err := w.Pull(d.params); err != nil {
		return 0, 0, 0, err
	}
	wait := time.Since(tw).Seconds()
	if err := b.Upload(m.Params, d.params); err != nil {
		return 0, 0, 0, err
	}
	l, k, err := r.compute(idx, scale)
	if err != nil {
		return 0, 0, 0, err
	}
	grads, err := r.hostGrads()
	if err != nil {
		return 0, 0, 0, err
	}
	if err := r.checkFinite(l, b.View(m.Grads, 0, np)); err != nil {
		return 0, 0, 0, err
	}
	tw = time.Now()
	if err := w.Push(grads[:np]); err != nil {
		return 0, 0, 0, err
	}
	return l, k, wait + time.Since(tw).Seconds(), nil
}

func (d *denseStepper) testAccuracy(*ps.Worker) (float64, error) {
	local, err := evaluateLocal(d.r.model, d.r.testAll, d.r.xbuf, d.r.ybuf)
	if err != nil {
		return 0, err
	}
	ev, err := local.sum(nil)
	return ev.Accuracy, err
}

// workPS is one worker's training loop: step after step through the
// parameter server. It returns the worker's statistics and the number of
// samples it trained on.
func (r *run) workPS(pcfg ps.Config, np int, stepper psStepper, res *Result) (ps.WorkerStats, float64, error) {
	cfg := r.cfg
	w, err := ps.NewWorker(r.Comm, pcfg, np)
	if err != nil {
		return ps.WorkerStats{}, 0, err
	}
	metrics, err := openMetrics(pick(r.reports(), cfg.Metrics))
	if err != nil {
		return ps.WorkerStats{}, 0, err
	}
	defer metrics.close()
	bsp := cfg.PS.Consistency == "bsp"
	steps := r.stepsPerEpoch()
	done := cfg.MaxSteps == 0
	total := 0.0
	prev := w.Stats()
	for epoch := 1; epoch <= cfg.Epochs && !done; epoch++ {
		t0 := time.Now()
		order := data.EpochOrder(r.shardRows, r.shuffleSeed(), epoch, cfg.Shuffle)
		var lossSum, correct, seen, waitSec float64
		ran := 0
		for step := 0; step < steps; step++ {
			if cfg.MaxSteps > 0 && res.Steps >= cfg.MaxSteps {
				done = true
				break
			}
			lo, hi := min(step*cfg.Batch, len(order)), min((step+1)*cfg.Batch, len(order))
			// BSP: the server averages the workers' pushes, so each is scaled
			// by workers/global batch and the average is the global batch's
			// mean gradient, as under AllReduce. SSP, ASP, DSSP: the server
			// applies each push as it comes (Downpour), so each carries 1/W
			// of this worker's mean gradient: W pushes then move the weights
			// about as far as one synchronous step with the same --lr.
			scale := 1 / float32(max(1, hi-lo)*r.nAll)
			if bsp {
				scale = float32(r.nAll) / float32(r.globalBatch(step))
			}
			l, k, wait, err := stepper.step(w, order[lo:hi], scale)
			if err != nil {
				return ps.WorkerStats{}, 0, fmt.Errorf("worker rank %d, epoch %d step %d (global step %d): %w", r.Comm.Rank(), epoch, step, res.Steps+1, err)
			}
			lossSum += l
			correct += float64(k)
			seen += float64(hi - lo)
			waitSec += wait
			res.Steps++
			ran++
		}
		done = done || (cfg.MaxSteps > 0 && res.Steps >= cfg.MaxSteps)
		if ran == 0 {
			break
		}
		total += seen
		if !r.reports() {
			continue
		}
		wall := time.Since(t0).Seconds()
		now := w.Stats()
		st := EpochStats{Epoch: epoch, Steps: ran, Loss: lossSum / math.Max(seen, 1), TrainAcc: correct / math.Max(seen, 1),
			SamplesPerSec: seen / wall, CommFraction: waitSec / wall, PSStats: psDelta(prev, now, wall)}
		prev = now
		if r.evalDue(epoch, done) {
			acc, err := stepper.testAccuracy(w)
			if err != nil {
				return ps.WorkerStats{}, 0, err
			}
			st.TestAcc = &acc
		}
		st.WallSec = time.Since(t0).Seconds()
		res.Epochs = append(res.Epochs, st)
		r.printf("%s  staleness ≤%d  wait %.1fs\n", st, st.MaxStaleness, st.WaitSec)
		if err := metrics.write(st); err != nil {
			return ps.WorkerStats{}, 0, fmt.Errorf("--metrics: %w", err)
		}
	}
	if err := w.Done(); err != nil {
		return ps.WorkerStats{}, 0, err
	}
	return w.Stats(), total, nil
}

// psDelta is what a worker measured between two snapshots of its stats.
func psDelta(prev, now ps.WorkerStats, wall float64) *PSStats {
	d := &PSStats{
		WaitSec:             now.WaitSeconds - prev.WaitSeconds,
		PushesPerSec:        float64(now.Pushes-prev.Pushes) / wall,
		PullsPerSec:         float64(now.Pulls-prev.Pulls) / wall,
		BytesSent:           now.BytesSent - prev.BytesSent,
		PushBytes:           now.PushBytes - prev.PushBytes,
		PushBytesUnfiltered: now.PushBytesUnfiltered - prev.PushBytesUnfiltered,
	}
	for s, n := range now.Staleness.Counts {
		if s < len(prev.Staleness.Counts) {
			n -= prev.Staleness.Counts[s]
		}
		d.StalenessHist = append(d.StalenessHist, n)
		if n > 0 {
			d.MaxStaleness = s
		}
	}
	return d
}

// runStats combines every worker's statistics (servers contribute zeros):
// the largest staleness, the mean wait, total rates and bytes, and the
// global training throughput.
func (r *run) runStats(ws ps.WorkerStats, samples float64, wall time.Duration) (*PSStats, float64, error) {
	c := r.Comm
	mine := []float32{float32(ws.MaxStaleness), float32(ws.WaitSeconds), float32(ws.Pushes), float32(ws.Pulls),
		float32(ws.BytesSent), float32(ws.PushBytes), float32(ws.PushBytesUnfiltered), float32(samples)}
	all := make([]float32, len(mine)*c.Size())
	if err := collectives.Allgather(c, mine, all); err != nil {
		return nil, 0, fmt.Errorf("collecting worker statistics: %w", err)
	}
	sec := wall.Seconds()
	out := &PSStats{}
	var total float64
	for q := r.cfg.PS.Servers; q < c.Size(); q++ {
		v := all[q*len(mine) : (q+1)*len(mine)]
		out.MaxStaleness = max(out.MaxStaleness, int(v[0]))
		out.WaitSec += float64(v[1]) / float64(r.nAll)
		out.PushesPerSec += float64(v[2]) / sec
		out.PullsPerSec += float64(v[3]) / sec
		out.BytesSent += int64(v[4])
		out.PushBytes += int64(v[5])
		out.PushBytesUnfiltered += int64(v[6])
		total += float64(v[7])
	}
	return out, total / sec, nil
}

func consistencyLabel(p PSConfig) string {
	switch p.Consistency {
	case "ssp":
		return fmt.Sprintf("ssp (staleness %d)", p.Staleness)
	case "dssp":
		return fmt.Sprintf("dssp (staleness %d..%d)", p.StalenessLow, p.StalenessHigh)
	}
	return p.Consistency
}
