package main

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dml-project/dml/bench/sweep"
	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/trainer"

	"github.com/dml-project/dml/internal/regfile"
)

// runReport is `dml train --run-report PREFIX`: each rank counts what it
// sends (through a counting Comm) and, at its end, writes its CPU time from
// the OS (getrusage) over its wall time to PREFIX.rank-R.json
// (sweep.RankReport). `dml bench sweep` passes it to every run.
type runReport struct {
	prefix string
	start  time.Time
	ru     syscall.Rusage
	comm   *countingComm
}

// startRunReport wraps c when prefix is set (else returns c unchanged and
// a nil report, whose finish does nothing).
func startRunReport(prefix string, c collectives.Comm) (collectives.Comm, *runReport) {
	if prefix == "" {
		return c, nil
	}
	r := &runReport{prefix: prefix, start: time.Now(), comm: &countingComm{Comm: c}}
	syscall.Getrusage(syscall.RUSAGE_SELF, &r.ru)
	if n, ok := c.(collectives.NativeAllreducer); ok {
		return &countingNativeComm{countingComm: r.comm, n: n}, r
	}
	return r.comm, r
}

// finish writes the rank's report; res may be nil (a failed run).
func (r *runReport) finish(res *trainer.Result, runErr error) error {
	if r == nil {
		return nil
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	wall := time.Since(r.start).Seconds()
	user := tv(ru.Utime) - tv(r.ru.Utime)
	sys := tv(ru.Stime) - tv(r.ru.Stime)
	rep := sweep.RankReport{Rank: r.comm.Rank(), Size: r.comm.Size(), WallSec: wall, UserSec: user, SysSec: sys,
		CPUUtil: (user + sys) / max(wall, 1e-9), BytesSent: r.comm.bytes.Load(), MessagesSent: r.comm.msgs.Load()}
	if res != nil {
		rep.Steps = res.Steps
		rep.Samples = res.SamplesPerSec * res.WallSec
	}
	if runErr != nil {
		rep.Error = runErr.Error()
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	if err := regfile.WriteFile(fmt.Sprintf("%s.rank-%d.json", r.prefix, rep.Rank), append(b, '\n')); err != nil {
		return fmt.Errorf("--run-report: %w", err)
	}
	return nil
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// countingComm counts the bytes and messages a rank hands to its transport.
type countingComm struct {
	collectives.Comm
	bytes, msgs atomic.Int64
}

var _ collectives.Comm = (*countingComm)(nil)

func (c *countingComm) Unwrap() collectives.Comm { return c.Comm }

func (c *countingComm) Isend(buf []float32, to, tag int) (collectives.Request, error) {
	c.bytes.Add(4 * int64(len(buf)))
	c.msgs.Add(1)
	return c.Comm.Isend(buf, to, tag)
}

func (c *countingComm) SendBytes(buf []byte, to, tag int) error {
	c.bytes.Add(int64(len(buf)))
	c.msgs.Add(1)
	return c.Comm.SendBytes(buf, to, tag)
}

// countingNativeComm keeps MPI's own AllReduce reachable (algorithm mpi);
// its traffic, which MPI does not show, counts as a ring's: 2(n−1)/n of
// the buffer per rank.
type countingNativeComm struct {
	*countingComm
	n collectives.NativeAllreducer
}

var _ collectives.NativeAllreducer = (*countingNativeComm)(nil)

func (c *countingNativeComm) NativeAllreduceSum(buf []float32) error {
	if n := int64(c.Size()); n > 1 {
		c.bytes.Add(4 * int64(len(buf)) * 2 * (n - 1) / n)
		c.msgs.Add(2 * (n - 1))
	}
	return c.n.NativeAllreduceSum(buf)
}
