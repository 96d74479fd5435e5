package mpi

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// WaitPolicy is how a wait for a peer (a Request's Wait, RecvBytes) passes
// the time: it polls MPI continuously for Spin, then yields the core
// between polls until Yield has passed since the wait began, then sleeps
// between polls, MinSleep at first and twice as long each time up to
// MaxSleep; once the wait has lasted 16·MaxSleep the cap grows to a
// sixteenth of the time waited, up to LongSleep (a wake-up is then at most
// about 1/16 late). A long wait then costs a few per cent of a core (each
// sleep and poll costs about 20 µs of CPU on a KVM guest) instead of the
// whole core that the rank's own compute, or another rank, needs; a short one (a ring step, a small AllReduce) still
// finds its message within a poll. A negative Spin spins for ever (the
// policy before back-off; see SpinWaitPolicy). Deadlines (Comm.Timeout,
// RecvBytesWithin) are checked after every poll and no sleep runs past one.
type WaitPolicy struct {
	Spin, Yield        time.Duration
	MinSleep, MaxSleep time.Duration
	LongSleep          time.Duration
}

// DefaultWaitPolicy: spin 50 µs, yield until 200 µs, then sleep 10 µs
// doubling to 100 µs, and to 1 ms in waits longer than 1.6 ms. Measured on
// a 2-core KVM guest (AMD EPYC, OpenMPI 4.1.4 vader): a rank that waits
// 2 s for a message uses 2-3% of a core in CPU time, against 99.8% when
// spinning (TestWaitCostsLittleCPU with DML_WAIT_CPU_MS=2000); AllReduce
// of 4 KiB-16 MiB, ring and tree, is within noise of spinning at 2 ranks
// (ratios 0.94-1.08 over 3 runs of BenchmarkWaitPolicy) and 0-13% slower
// at 1-4 MiB with 4 ranks on the 2 cores (oversubscribed; the MPI_Allreduce
// control column moved 0.84-1.13 in the same runs).
var DefaultWaitPolicy = WaitPolicy{Spin: 50 * time.Microsecond, Yield: 200 * time.Microsecond,
	MinSleep: 10 * time.Microsecond, MaxSleep: 100 * time.Microsecond, LongSleep: time.Millisecond}

// SpinWaitPolicy polls without pause until the message comes (yielding
// after 2000 polls when this node's ranks outnumber its cores): the lowest
// latency, a whole core per waiting rank. DML_MPI_WAIT=spin selects it.
var SpinWaitPolicy = WaitPolicy{Spin: -1}

// SetWaitPolicy sets the wait policy of this process's MPI waits. Call it
// while no wait is in progress (before the first collective, or between
// steps from the goroutine that calls MPI).
func SetWaitPolicy(p WaitPolicy) error {
	if p.Spin >= 0 && (p.Yield < 0 || p.MinSleep <= 0 || p.MaxSleep < p.MinSleep || p.LongSleep < p.MaxSleep) {
		return fmt.Errorf("mpi wait policy %+v: want Yield ≥ 0 and 0 < MinSleep ≤ MaxSleep ≤ LongSleep", p)
	}
	C.dml_spin_ns = C.longlong(p.Spin.Nanoseconds())
	C.dml_yield_ns = C.longlong(p.Yield.Nanoseconds())
	C.dml_sleep_min_ns = C.longlong(p.MinSleep.Nanoseconds())
	C.dml_sleep_max_ns = C.longlong(p.MaxSleep.Nanoseconds())
	C.dml_sleep_long_ns = C.longlong(p.LongSleep.Nanoseconds())
	return nil
}

// waitPolicyFromEnv is the policy DML_MPI_WAIT names (ParseWaitPolicy).
func waitPolicyFromEnv() (WaitPolicy, error) {
	return ParseWaitPolicy(os.Getenv("DML_MPI_WAIT"))
}

// ParseWaitPolicy reads a policy as DML_MPI_WAIT spells it: "spin",
// "backoff" or "" for DefaultWaitPolicy, or five durations
// "spin,yield,minsleep,maxsleep,longsleep" (e.g. "50us,200us,10us,100us,1ms").
func ParseWaitPolicy(v string) (WaitPolicy, error) {
	switch v {
	case "", "backoff":
		return DefaultWaitPolicy, nil
	case "spin":
		return SpinWaitPolicy, nil
	}
	parts := strings.Split(v, ",")
	if len(parts) == 5 {
		var d [5]time.Duration
		var err error
		for i, p := range parts {
			if d[i], err = time.ParseDuration(strings.TrimSpace(p)); err != nil {
				break
			}
		}
		if err == nil {
			return WaitPolicy{Spin: d[0], Yield: d[1], MinSleep: d[2], MaxSleep: d[3], LongSleep: d[4]}, nil
		}
	}
	return WaitPolicy{}, fmt.Errorf("DML_MPI_WAIT=%q: want spin, backoff, or spin,yield,minsleep,maxsleep,longsleep durations", v)
}
