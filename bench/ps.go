package bench

import (
	"encoding/csv"
	"fmt"
	"io"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/ps"
)

// PSConfig is one `dml bench ps` run: push/pull round trips through the
// parameter server, as ps-lite's own benchmark measures them. Each worker
// loops Iters times (after Warmup untimed round trips): push a gradient,
// pull the weights (or one fused push-pull request with Fused). Dense
// workloads push and pull all Params keys; sparse ones (Keys > 0) push and
// pull Keys random keys of Of (a fresh set from a small pool each time).
// Every combination of Models and Filters is one row.
type PSConfig struct {
	Params int // dense: model size (keys); 0 when sparse
	Keys   int // sparse: keys per round trip; 0 when dense
	Of     int // sparse: model size

	Servers       int
	Iters, Warmup int
	Fused         bool
	Models        []ps.Consistency
	Filters       []string // each a ps.ParseFilters list ("none", "fp16", "sigmod:0.001,fp16")
	Staleness     int      // SSP's bound
	StalenessLow  int      // DSSP's range
	StalenessHigh int
	Timeout       time.Duration // ps.Config.Timeout (0: its default)
	// Replicate lists ps.Config.ReplicateEvery alternatives (0: no
	// replication), one row each: what chain replication costs.
	Replicate []int
	// Optimizer is the servers' update rule (SGD by default; a rule's
	// state is kept on the servers, and a replica carries it too), with
	// PyTorch's defaults for its own settings (Adam's betas and eps, LARS's
	// trust coefficient).
	Optimizer optim.Kind
}

// DefaultPSConfig is what `dml bench ps` runs with no flags: the MLP's
// 235,146 dense floats through one server under BSP, unfiltered.
func DefaultPSConfig() PSConfig {
	return PSConfig{Params: 235146, Servers: 1, Iters: 200, Warmup: 10, Models: []ps.Consistency{ps.BSP},
		Filters: []string{"none"}, Staleness: 2, StalenessLow: 1, StalenessHigh: 4, Replicate: []int{0}}
}

// Sparse reports whether the workload is a sparse key set.
func (c PSConfig) Sparse() bool { return c.Keys > 0 || c.Of > 0 }

// ModelSize is the number of keys of the model.
func (c PSConfig) ModelSize() int {
	if c.Sparse() {
		return c.Of
	}
	return c.Params
}

// KeysPerTrip is how many keys each push (and each pull) carries.
func (c PSConfig) KeysPerTrip() int {
	if c.Sparse() {
		return c.Keys
	}
	return c.Params
}

// Validate reports the first bad field (a usage error). ranks is the size
// of the job, or 0 when it is not known yet.
func (c PSConfig) Validate(ranks int) error {
	switch {
	case c.Sparse() && c.Params > 0:
		return fmt.Errorf("give either --params N (dense) or --keys K --of N (sparse), not both")
	case c.Sparse() && c.Keys <= 0:
		return fmt.Errorf("--keys %d: a sparse round trip needs at least 1 key", c.Keys)
	case c.Sparse() && c.Of <= 0:
		return fmt.Errorf("--of %d: the sparse model needs at least 1 key (--keys K --of N)", c.Of)
	case c.Sparse() && c.Keys > c.Of:
		return fmt.Errorf("--keys %d is beyond the model: only %d keys (--of)", c.Keys, c.Of)
	case !c.Sparse() && c.Params <= 0:
		return fmt.Errorf("--params %d: the model needs at least 1 key", c.Params)
	case c.Servers < 1:
		return fmt.Errorf("--servers %d: need at least 1 server", c.Servers)
	case ranks > 0 && c.Servers > ranks-1:
		return fmt.Errorf("--servers %d in a job of %d ranks: at most %d (ranks − 1), so that at least one worker is left", c.Servers, ranks, ranks-1)
	case c.ModelSize() < c.Servers:
		return fmt.Errorf("%d servers for a model of %d keys: every server needs a key", c.Servers, c.ModelSize())
	case c.Iters < 1:
		return fmt.Errorf("-n %d: need at least 1 timed round trip", c.Iters)
	case c.Warmup < 0:
		return fmt.Errorf("-w %d must not be negative", c.Warmup)
	case len(c.Models) == 0:
		return fmt.Errorf("no consistency model given (--models bsp,ssp,asp,dssp)")
	case len(c.Filters) == 0:
		return fmt.Errorf("no filter given (--filters none,fp16,...)")
	case len(c.Replicate) == 0:
		return fmt.Errorf("no --replicate-every given (0: none)")
	}
	for _, r := range c.Replicate {
		if r < 0 {
			return fmt.Errorf("--replicate-every %d: want 0 (none) or a positive count", r)
		}
	}
	for _, f := range c.Filters {
		if _, err := ps.ParseFilters(f); err != nil {
			return fmt.Errorf("--filters %q: %v", f, err)
		}
	}
	return nil
}

// psConfig is the parameter-server configuration of one row.
func (c PSConfig) psConfig(m ps.Consistency, filter string, replicate int) (ps.Config, error) {
	fs, err := ps.ParseFilters(filter)
	if err != nil {
		return ps.Config{}, err
	}
	pc := ps.Config{Servers: c.Servers, Consistency: m, Staleness: c.Staleness, StalenessLow: c.StalenessLow,
		StalenessHigh: c.StalenessHigh, LR: 0.01, Momentum: 0.9, Optimizer: c.Optimizer, Timeout: c.Timeout, Filters: fs,
		ReplicateEvery: replicate}
	switch c.Optimizer {
	case optim.Adam, optim.AdamW:
		pc.Beta1, pc.Beta2, pc.Eps = optim.DefaultBeta1, optim.DefaultBeta2, optim.DefaultAdamEps
	case optim.LARS:
		pc.TrustCoef = optim.DefaultTrustCoef
	}
	return pc, nil
}

// PSRow is one line of `dml bench ps`.
type PSRow struct {
	Workload    string  `json:"workload"` // "dense 235146" or "sparse 5000/1000000"
	Consistency string  `json:"consistency"`
	Filter      string  `json:"filter"`
	Mode        string  `json:"mode"` // "push+pull" or "pushpull" (fused)
	Servers     int     `json:"servers"`
	Replicate   int     `json:"replicate_every"` // ps.Config.ReplicateEvery (0: none)
	Workers     int     `json:"workers"`
	Keys        int     `json:"keys"`          // keys per push (and per pull)
	TripsPerSec float64 `json:"trips_per_sec"` // round trips/s per worker (mean over workers)
	TripsMin    float64 `json:"trips_min"`     // of the slowest worker
	KeysPerSec  float64 `json:"keys_per_sec"`  // keys pushed per second, all workers
	GBPerSec    float64 `json:"gb_per_sec"`    // bytes sent + received by all workers per second
	ServerCPU   float64 `json:"server_cpu"`    // cores busy per server rank (user+sys / wall, mean)
	WorkerCPU   float64 `json:"worker_cpu"`    // cores busy per worker rank (mean)
	WaitShare   float64 `json:"wait_share"`    // share of a worker's time inside ps calls (mean)
}

// cpuSeconds is this process's user+system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// The figures every rank contributes to a row (Allgather).
const (
	fIsWorker = iota
	fTrips
	fSeconds
	fBytes
	fCPU
	fWall
	fWait
	nFigures
)

// RunPS runs every row of cfg on every rank of c (all ranks call it with
// the same cfg; ranks 0..Servers-1 serve) and calls emit, on the first
// worker rank, with each row once it is measured. CPU figures are per
// process (getrusage): run one rank per process (mpirun) for them to mean
// per rank.
func RunPS(c collectives.Comm, cfg PSConfig, emit func(PSRow)) ([]PSRow, error) {
	if err := cfg.Validate(c.Size()); err != nil {
		return nil, err
	}
	var rows []PSRow
	for _, m := range cfg.Models {
		for _, f := range cfg.Filters {
			for _, r := range cfg.Replicate {
				row, err := runPSRow(c, cfg, m, f, r)
				if err != nil {
					return rows, fmt.Errorf("bench ps, %v, filter %s, replicate every %d: %w", m, f, r, err)
				}
				rows = append(rows, row)
				if c.Rank() == cfg.Servers && emit != nil {
					emit(row)
				}
			}
		}
	}
	return rows, nil
}

func runPSRow(c collectives.Comm, cfg PSConfig, m ps.Consistency, filter string, replicate int) (PSRow, error) {
	pcfg, err := cfg.psConfig(m, filter, replicate)
	if err != nil {
		return PSRow{}, err
	}
	p := cfg.ModelSize()
	mine := make([]float32, nFigures)
	if err := c.Barrier(); err != nil {
		return PSRow{}, err
	}
	if c.Rank() < cfg.Servers {
		initial := make([]float32, p)
		cpu0, t0 := cpuSeconds(), time.Now()
		if _, err := ps.RunServer(c, pcfg, initial); err != nil {
			return PSRow{}, err
		}
		mine[fCPU], mine[fWall] = float32(cpuSeconds()-cpu0), float32(time.Since(t0).Seconds())
	} else if err := runPSWorker(c, cfg, pcfg, mine); err != nil {
		return PSRow{}, err
	}
	all := make([]float32, nFigures*c.Size())
	if err := collectives.Allgather(c, mine, all); err != nil {
		return PSRow{}, err
	}
	mode := "push+pull"
	if cfg.Fused {
		mode = "pushpull"
	}
	workload := fmt.Sprintf("dense %d", cfg.Params)
	if cfg.Sparse() {
		workload = fmt.Sprintf("sparse %d/%d", cfg.Keys, cfg.Of)
	}
	if filter == "" {
		filter = "none"
	}
	row := PSRow{Workload: workload, Consistency: m.String(), Filter: filter, Mode: mode, Servers: cfg.Servers, Replicate: replicate,
		Workers: c.Size() - cfg.Servers, Keys: cfg.KeysPerTrip(), TripsMin: -1}
	var sumSec, bytes float64
	for q := 0; q < c.Size(); q++ {
		v := all[q*nFigures : (q+1)*nFigures]
		if v[fIsWorker] == 0 {
			row.ServerCPU += float64(v[fCPU]/v[fWall]) / float64(row.Servers)
			continue
		}
		rate := float64(v[fTrips] / v[fSeconds])
		row.TripsPerSec += rate / float64(row.Workers)
		if row.TripsMin < 0 || rate < row.TripsMin {
			row.TripsMin = rate
		}
		row.KeysPerSec += rate * float64(row.Keys)
		row.WorkerCPU += float64(v[fCPU]/v[fSeconds]) / float64(row.Workers)
		row.WaitShare += float64(v[fWait]/v[fSeconds]) / float64(row.Workers)
		sumSec = max(sumSec, float64(v[fSeconds]))
		bytes += float64(v[fBytes])
	}
	if sumSec > 0 {
		row.GBPerSec = bytes / sumSec / 1e9
	}
	return row, nil
}

// runPSWorker is one worker's loop; it fills its figures into out.
func runPSWorker(c collectives.Comm, cfg PSConfig, pcfg ps.Config, out []float32) error {
	p := cfg.ModelSize()
	w, err := ps.NewWorker(c, pcfg, p)
	if err != nil {
		return err
	}
	k := cfg.KeysPerTrip()
	weights := make([]float32, k)
	grad := make([]float32, k)
	var keySets [][]int64
	if cfg.Sparse() {
		rng := rand.New(rand.NewSource(int64(c.Rank()) + 7))
		for range 16 {
			keySets = append(keySets, randomKeys(rng, cfg.Keys, cfg.Of))
		}
	}
	var t0 time.Time
	var cpu0 float64
	var st0 ps.WorkerStats
	// Small gradients that differ by key: every filter has work (sigmod
	// sends some at once and the rest as their residues grow), the weights
	// stay finite.
	for i := range grad {
		grad[i] = float32((i*7919+c.Rank()*31)%1000) * 2e-6
	}
	for it := -cfg.Warmup; it < cfg.Iters; it++ {
		if it == 0 {
			st0, t0, cpu0 = w.Stats(), time.Now(), cpuSeconds()
		}
		if cfg.Sparse() {
			keys := keySets[(it+cfg.Warmup)%len(keySets)]
			if cfg.Fused {
				err = w.PushPullKeys(keys, grad, weights)
			} else if err = w.PushKeys(keys, grad); err == nil {
				err = w.PullKeys(keys, weights)
			}
		} else {
			if cfg.Fused {
				err = w.PushPull(grad, weights)
			} else if err = w.Push(grad); err == nil {
				err = w.Pull(weights)
			}
		}
		if err != nil {
			return err
		}
	}
	sec := time.Since(t0).Seconds()
	cpu := cpuSeconds() - cpu0
	st := w.Stats()
	if err := w.Done(); err != nil {
		return err
	}
	out[fIsWorker], out[fTrips], out[fSeconds] = 1, float32(cfg.Iters), float32(sec)
	out[fBytes] = float32(st.BytesSent - st0.BytesSent + st.BytesReceived - st0.BytesReceived)
	out[fCPU], out[fWait] = float32(cpu), float32(st.WaitSeconds-st0.WaitSeconds)
	return nil
}

// randomKeys draws k distinct keys of [0, n), sorted.
func randomKeys(rng *rand.Rand, k, n int) []int64 {
	if 2*k > n { // dense enough: a random subset by permutation
		perm := rng.Perm(n)[:k]
		keys := make([]int64, k)
		for i, v := range perm {
			keys[i] = int64(v)
		}
		slices.Sort(keys)
		return keys
	}
	seen := make(map[int64]bool, k)
	keys := make([]int64, 0, k)
	for len(keys) < k {
		v := rng.Int63n(int64(n))
		if !seen[v] {
			seen[v] = true
			keys = append(keys, v)
		}
	}
	slices.Sort(keys)
	return keys
}

// ParsePSFilters splits a --filters list: alternatives separated by commas,
// filters chained within one alternative by '+' ("none,fp16,sigmod:0.001+fp16").
// It returns each alternative as a ps.ParseFilters list.
func ParsePSFilters(s string) ([]string, error) {
	var out []string
	for _, alt := range strings.Split(s, ",") {
		alt = strings.TrimSpace(alt)
		if alt == "" {
			return nil, fmt.Errorf("empty filter in %q", s)
		}
		chain := strings.ReplaceAll(alt, "+", ",")
		if _, err := ps.ParseFilters(chain); err != nil {
			return nil, err
		}
		out = append(out, chain)
	}
	return out, nil
}

// PSWriter writes PSRows as a table, csv or json (see Formats).
type PSWriter struct {
	w      io.Writer
	format string
	csv    *csv.Writer
	json   jsonArray
}

var psColumns = []string{"workload", "consistency", "filter", "mode", "servers", "workers", "keys",
	"trips_per_sec", "trips_min", "keys_per_sec", "gb_per_sec", "server_cpu", "worker_cpu", "wait_share", "replicate_every"}

// NewPSWriter returns a writer for format.
func NewPSWriter(w io.Writer, format string) (*PSWriter, error) {
	if err := CheckFormat(format); err != nil {
		return nil, err
	}
	pw := &PSWriter{w: w, format: format, json: jsonArray{w: w}}
	switch format {
	case "csv":
		pw.csv = csv.NewWriter(w)
		pw.csv.Write(psColumns)
		pw.csv.Flush()
	case "table":
		fmt.Fprintf(w, "# round trips/s per worker (mean, slowest), keys/s and GB/s of all workers; CPU in cores busy per rank\n")
		fmt.Fprintf(w, "#%-22s %-5s %-16s %-9s %3s %4s %3s %12s %10s %12s %7s %7s %7s %6s\n", "workload", "cons", "filter", "mode",
			"S", "repl", "W", "trips/s/wkr", "slowest", "keys/s", "GB/s", "srvCPU", "wkrCPU", "wait")
	}
	return pw, nil
}

// Write writes one row.
func (pw *PSWriter) Write(r PSRow) error {
	f := func(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }
	switch pw.format {
	case "csv":
		pw.csv.Write([]string{r.Workload, r.Consistency, r.Filter, r.Mode, strconv.Itoa(r.Servers), strconv.Itoa(r.Workers),
			strconv.Itoa(r.Keys), f(r.TripsPerSec, 1), f(r.TripsMin, 1), f(r.KeysPerSec, 0), f(r.GBPerSec, 3),
			f(r.ServerCPU, 2), f(r.WorkerCPU, 2), f(r.WaitShare, 3), strconv.Itoa(r.Replicate)})
		pw.csv.Flush()
		return pw.csv.Error()
	case "json":
		return pw.json.add(r)
	}
	_, err := fmt.Fprintf(pw.w, " %-22s %-5s %-16s %-9s %3d %4d %3d %12.1f %10.1f %12.0f %7.3f %7.2f %7.2f %5.0f%%\n",
		r.Workload, r.Consistency, r.Filter, r.Mode, r.Servers, r.Replicate, r.Workers, r.TripsPerSec, r.TripsMin, r.KeysPerSec,
		r.GBPerSec, r.ServerCPU, r.WorkerCPU, 100*r.WaitShare)
	return err
}

// Close finishes the output.
func (pw *PSWriter) Close() error {
	if pw.format == "json" {
		return pw.json.close()
	}
	return nil
}
