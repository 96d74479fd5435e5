package engine

import (
	"fmt"

	"github.com/dml-project/dml/trainer/data"
)

// Resuming at another number of ranks (issue 20's first part): under
// --sync allreduce, where every rank holds the whole training state; under
// ps bsp, whose checkpoint holds the servers' whole vectors (any number of
// servers lays them anew) and whose workers are at one step; under dpsgd,
// from the consensus model (consensusState). The strategy's unit says
// which (reshards), and its Strategy trains a re-dealt epoch's rows
// (Hooks.SetTrain).
//
// An epoch's sample order is a pure function of (seed, shard, epoch) for
// a given number of ranks: rank q of R walks its strided shard
// (data.StridedShard) in the order data.EpochOrder gives it. A checkpoint
// written at step S of epoch E by R ranks resumed by R' ≠ R ranks goes on
// with the rest of epoch E: every sample of E that no rank has trained yet,
// once, and no other. The rest is what each of the R ranks had left of its
// order after S steps, taken in turn (the first left of rank 0, of rank 1,
// …, then the second of each), dealt to the R' ranks in turn (rank r' takes
// the r'-th, the (r'+R')-th, …). The next epochs are the standard ones of
// R' ranks. The Position records how the epoch was begun (Reshard: one
// Segment per size it ran at), so a checkpoint inside such an epoch
// resumes bit for bit at the same size, and again at yet another size.

// shardSeed is shard idx's shuffling seed (job.shuffleSeed).
func shardSeed(seed uint64, idx int) uint64 {
	return seed ^ uint64(idx+1)*0x9E3779B97F4A7C15
}

// epochParts is, for epoch of n samples begun as segs records (at least
// one segment), what is left of it dealt to ranks ranks: parts[r] is rank
// r's rows of the training set, in the order it trains them.
func epochParts(n int, seed uint64, epoch int, shuffle bool, segs []Segment, ranks int) [][]int {
	r0 := segs[0].Ranks
	parts := make([][]int, r0)
	for q := range r0 {
		order := data.EpochOrder(data.ShardLen(n, q, r0), shardSeed(seed, q), epoch, shuffle)
		rows := make([]int, len(order))
		for i, o := range order {
			rows[i] = q + o*r0
		}
		parts[q] = rows
	}
	for k, sg := range segs {
		var rest []int
		for i := 0; ; i++ {
			more := false
			for _, p := range parts {
				if at := min(sg.Steps*sg.Batch, len(p)) + i; at < len(p) {
					rest = append(rest, p[at])
					more = true
				}
			}
			if !more {
				break
			}
		}
		next := ranks
		if k+1 < len(segs) {
			next = segs[k+1].Ranks
		}
		parts = make([][]int, next)
		for i, row := range rest {
			parts[i%next] = append(parts[i%next], row)
		}
	}
	return parts
}

// partSteps is the steps an epoch dealt as parts takes at batch samples
// per rank: enough for the longest part (the first).
func partSteps(parts [][]int, batch int) int {
	if len(parts) == 0 {
		return 0
	}
	return (len(parts[0]) + batch - 1) / batch
}

// resharded is the Position a checkpoint at pos, written by ranks ranks
// at batch samples per rank, resumes from on another number of ranks:
// the same one when the checkpoint is at an epoch's start, else step 0 of
// the rest of its epoch, with the stretch it ran recorded.
func resharded(pos Position, ranks, batch int) Position {
	if pos.Step == 0 && len(pos.Reshard) == 0 {
		return pos
	}
	segs := append(append([]Segment(nil), pos.Reshard...), Segment{Ranks: ranks, Steps: pos.Step, Batch: batch})
	return Position{Epoch: pos.Epoch, Step: 0, Steps: pos.Steps, Reshard: segs}
}

// MaxSegments bounds how many sizes one epoch may have run at (a
// checkpoint's record of them is read before anything is trusted).
const MaxSegments = 64

// checkSegments reports a Reshard that no run on n samples could have
// written: too many stretches, or one of no rank, more ranks or a larger
// batch than samples, or more steps than an epoch has.
func checkSegments(segs []Segment, n int) error {
	if len(segs) > MaxSegments {
		return fmt.Errorf("its epoch ran at %d sizes, more than %d", len(segs), MaxSegments)
	}
	for i, sg := range segs {
		if sg.Ranks < 1 || sg.Ranks > n || sg.Batch < 1 || sg.Batch > n || sg.Steps < 0 || sg.Steps > n {
			return fmt.Errorf("stretch %d of its epoch (%d ranks, %d steps of batch %d) does not fit %d samples", i+1, sg.Ranks, sg.Steps, sg.Batch, n)
		}
	}
	return nil
}

// reshardEpoch is this rank's order of epoch and the epoch's steps when
// it was begun by other ranks (reshard): its part of the rest, as rows of
// the training set. It tells the strategy (Hooks.SetTrain) to train on
// those rows for the epoch; endReshard gives it its shard back.
func (j *Job) reshardEpoch(s Strategy, epoch int, reshard []Segment) (order []int, steps int, err error) {
	setTrain := s.Hooks().SetTrain
	if setTrain == nil || j.trainSrc == nil {
		return nil, 0, fmt.Errorf("resuming epoch %d, begun by %d ranks: %s cannot re-deal an epoch", epoch, reshard[len(reshard)-1].Ranks, j.Cfg.Sync)
	}
	parts := epochParts(j.Sched.N, j.Cfg.Seed, epoch, j.Cfg.Shuffle, reshard, j.Sched.Ranks)
	mine := parts[j.ShardIdx]
	part, err := j.trainSrc.Subset(mine)
	if err != nil {
		return nil, 0, fmt.Errorf("resuming epoch %d: this rank's part of its rest: %w", epoch, err)
	}
	setTrain(part)
	j.partRows = mine
	j.partLens = make([]int, len(parts))
	for r, p := range parts {
		j.partLens[r] = len(p)
	}
	order = make([]int, len(mine))
	for i := range order {
		order[i] = i
	}
	return order, partSteps(parts, j.Cfg.Batch), nil
}

// endReshard ends a re-dealt epoch: the strategy trains on its shard
// again.
func (j *Job) endReshard(s Strategy) {
	if setTrain := s.Hooks().SetTrain; setTrain != nil && j.partRows != nil {
		setTrain(nil)
	}
	j.partRows, j.partLens = nil, nil
}
