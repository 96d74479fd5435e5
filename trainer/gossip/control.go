package gossip

import (
	"fmt"
	"time"
)

// AD-PSGD's control protocol (trainer/decentral/sync_adpsgd.go), free of I/O and
// of the clock: the strategy feeds these the messages and the time and
// carries out what they decide; control_test.go drives them through
// scripted scenarios (reports in any order, a point called while
// averagings are in flight, pauses before and after the call, silent
// neighbours) on a fake clock.

// Point is a synchronisation point: the end of epoch Epoch, which ends
// training when Final.
type Point struct {
	Epoch int
	Final bool
}

// Control message kinds, as the strategy sends them (with two arguments).
const (
	MsgRequest  = 1 + iota // active → passive: my model follows (len, step)
	MsgProgress            // any → rank 0: (steps, samples) since the last report
	MsgSync                // rank 0 → all: (epoch, final) synchronisation point
	MsgPause               // active → passive: (epoch, spent) I pause for the point; spent 1: I have run my share of --max-steps
)

// EpochClock is rank 0's side: it adds up the progress every rank
// reports and calls a synchronisation point once the ranks together have
// trained an epoch's samples (or --max-steps steps, the final point).
type EpochClock struct {
	perEpoch       int64 // samples in an epoch: the training set's size
	epochs         int   // Config.Epochs
	maxSteps       int64 // Config.MaxSteps (< 0: no cap)
	steps, samples int64 // every rank's, reported so far
	epoch          int   // the epoch the next point ends
}

func NewEpochClock(perEpoch, epochs, maxSteps int) *EpochClock {
	return &EpochClock{perEpoch: int64(perEpoch), epochs: epochs, maxSteps: int64(maxSteps), epoch: 1}
}

// ResumeAt starts the clock at the synchronisation point a checkpoint
// was written at, before epoch `epoch`, with `steps` steps run by every
// rank together.
func (c *EpochClock) ResumeAt(epoch int, steps int64) {
	c.epoch, c.steps = epoch, steps
	c.samples = int64(epoch-1) * c.perEpoch
}

// Report adds a rank's progress since its last report.
func (c *EpochClock) Report(steps, samples int64) {
	c.steps += steps
	c.samples += samples
}

// Due is the point to call now, or nil; a point is called once.
func (c *EpochClock) Due() *Point {
	capped := c.maxSteps >= 0 && c.steps >= c.maxSteps
	if !capped && c.samples < int64(c.epoch)*c.perEpoch {
		return nil
	}
	pt := &Point{Epoch: c.epoch, Final: capped || c.epoch >= c.epochs}
	c.epoch++
	return pt
}

// PassiveControl is a passive rank's server's side: it answers averaging
// requests until rank 0 calls a point and every active neighbour has
// paused, then parks until the rank resumes it; an active neighbour that
// has sent nothing for the timeout (unless it paused) stopped or hangs.
type PassiveControl struct {
	rank    int
	nbrs    []int
	size    int // floats in a model
	timeout time.Duration
	heard   map[int]time.Time
	paused  map[int]bool
	spent   map[int]bool // paused at their share of --max-steps
	pending *Point
}

func NewPassiveControl(rank int, nbrs []int, size int, timeout time.Duration, now time.Time) *PassiveControl {
	p := &PassiveControl{rank: rank, nbrs: nbrs, size: size, timeout: timeout, heard: map[int]time.Time{}, paused: map[int]bool{}, spent: map[int]bool{}}
	for _, a := range nbrs {
		p.heard[a] = now
	}
	return p
}

// Message handles a control message from rank src at now; answer: src
// asks to average (its model follows).
func (p *PassiveControl) Message(now time.Time, src int, kind, a, b int64) (answer bool, err error) {
	p.heard[src] = now
	switch kind {
	case MsgRequest:
		if int(a) != p.size {
			return false, fmt.Errorf("adpsgd: rank %d offers a model of %d floats, this rank's has %d", src, a, p.size)
		}
		return true, nil
	case MsgSync:
		p.pending = &Point{Epoch: int(a), Final: b != 0}
	case MsgPause:
		p.paused[src] = true
		if b != 0 {
			p.spent[src] = true
		}
	default:
		return false, fmt.Errorf("adpsgd: passive rank %d got a message of kind %d from rank %d", p.rank, kind, src)
	}
	return false, nil
}

// Ready is the point to park for: called, and every active neighbour
// paused (no averaging of theirs is in flight).
func (p *PassiveControl) Ready() *Point {
	if p.pending != nil && len(p.paused) == len(p.nbrs) {
		return p.pending
	}
	return nil
}

// Called says rank 0 has called a point that the rank has not resumed
// from: the rank should take no further step before it.
func (p *PassiveControl) Called() bool { return p.pending != nil }

// AllSpent says every active neighbour has paused at its share of
// --max-steps: none will ask to average before the final point, so a
// passive rank waiting to be averaged (its bounded lag) must not.
func (p *PassiveControl) AllSpent() bool { return len(p.spent) == len(p.nbrs) }

// Resumed starts the next epoch at now, after the point.
func (p *PassiveControl) Resumed(now time.Time) {
	p.pending, p.paused, p.spent = nil, map[int]bool{}, map[int]bool{}
	for a := range p.heard {
		p.heard[a] = now
	}
}

// Idle checks, when nothing arrived, for an active neighbour silent too
// long.
func (p *PassiveControl) Idle(now time.Time) error {
	for _, a := range p.nbrs {
		if t := p.heard[a]; !p.paused[a] && now.Sub(t) > p.timeout {
			return fmt.Errorf("adpsgd: passive rank %d: active neighbour rank %d has been silent for %v (Config.Timeout): it stopped, hangs, or waits for a rank that does", p.rank, a, now.Sub(t).Round(time.Second))
		}
	}
	return nil
}
