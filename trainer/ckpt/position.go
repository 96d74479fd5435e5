package ckpt

// Position is where the loop is: the next step to run is step Step
// (0-based) of epoch Epoch (1-based), and Steps steps have run before it,
// in all epochs (what --max-steps counts). The sample order of an epoch is
// a pure function of (seed, shard, epoch), so a Position is all the loop
// needs to continue exactly where it stopped. Reshard, when the epoch was
// begun by another number of ranks, records how (reshard.go): Step then
// counts the steps of the rest this job's ranks were dealt.
type Position struct {
	Epoch   int       `json:"epoch"`
	Step    int       `json:"step"`
	Steps   int       `json:"steps"`
	Reshard []Segment `json:"reshard,omitempty"`
}

// Segment is a stretch of an epoch that Ranks ranks ran: Steps steps of at
// most Batch samples each. The first segment of an epoch walked the
// standard order of Ranks ranks; each later one the rest its predecessors
// left, dealt as the package comment says.
type Segment struct {
	Ranks int `json:"ranks"`
	Steps int `json:"steps"`
	Batch int `json:"batch"`
}

// Emergency is the emergency record of a checkpoint written by
// Trainer.LastWord: the death that made a survivor write it.
type Emergency struct {
	// DeadRank is the rank found dead, DeadHost its host (if known) and
	// FoundBy the rank that found it.
	DeadRank int    `json:"dead_rank"`
	DeadHost string `json:"dead_host,omitempty"`
	FoundBy  int    `json:"found_by"`
	// WrittenBy is the rank that wrote the file (LastWord sets it).
	WrittenBy int `json:"written_by"`
	// OwnStatistics: the batch-norm statistics are WrittenBy's own, not
	// the ranks' average.
	OwnStatistics bool `json:"own_statistics,omitempty"`
	// Time is when it was written (RFC 3339).
	Time string `json:"time"`
	// Part: a ps server's share of the state, the key ranges Held
	// ([lo, hi) each; the rest of the file's vectors is zero), written
	// as ckpt-s<steps>.part-r<rank>.npz, to be joined with the other
	// survivors' parts of the same step (trainer/paramserver/lastword_ps.go); MergedFrom
	// names the ranks whose parts a joined checkpoint was made of.
	Part       bool     `json:"part,omitempty"`
	Held       [][2]int `json:"held_ranges,omitempty"`
	MergedFrom []int    `json:"merged_from,omitempty"`
}
