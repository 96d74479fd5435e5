package collectives

import (
	"fmt"
	"strings"
)

// Op is the reduction an AllReduce applies.
type Op int

const (
	// Sum leaves Σ over ranks in every element.
	Sum Op = iota
	// Avg leaves the mean over ranks (the sum times 1/Size()).
	Avg
)

func (o Op) String() string {
	switch o {
	case Sum:
		return "sum"
	case Avg:
		return "avg"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Algorithm names an AllReduce algorithm.
type Algorithm string

const (
	// Ring is the bandwidth-optimal ring: reduce-scatter then all-gather,
	// chunked and pipelined (ring.go).
	Ring Algorithm = "ring"
	// Tree is the latency-optimal algorithm for small messages: recursive
	// doubling (recdoubling.go). The name is kept for the CLI whatever its shape.
	Tree Algorithm = "tree"
	// Native is the transport's own AllReduce (MPI_Allreduce over MPI).
	Native Algorithm = "mpi"
	// Auto picks one of the others by message size, rank count and
	// transport (AutoChoice, from measured thresholds: auto.go).
	Auto Algorithm = "auto"
)

// Algorithms lists the names ParseAlgorithm accepts.
var Algorithms = []Algorithm{Ring, Tree, Native, Auto}

// ParseAlgorithm turns a name into an Algorithm, or says which names exist.
func ParseAlgorithm(s string) (Algorithm, error) {
	for _, a := range Algorithms {
		if string(a) == strings.ToLower(strings.TrimSpace(s)) {
			return a, nil
		}
	}
	names := make([]string, len(Algorithms))
	for i, a := range Algorithms {
		names[i] = string(a)
	}
	return "", fmt.Errorf("unknown allreduce algorithm %q (want one of %s)", s, strings.Join(names, ", "))
}

// NativeAllreducer is implemented by transports that have their own
// AllReduce (MPI). Sum only; the caller scales for Avg.
type NativeAllreducer interface {
	NativeAllreduceSum(buf []float32) error
}

// Message tags used by the collectives. Other users of a Comm (the parameter
// server) must use tags outside [TagCollectivesMin, TagCollectivesMax].
//
// A collective's tags carry its sequence number modulo TagSeqMod (on a
// transport that numbers them: Sequencer): tag = TagCollectivesMin + kind +
// tagKinds·(seq mod TagSeqMod). Ranks whose schedules differ (one in
// allreduce #12, its peer in #11) then wait for each other instead of
// reading one operation's floats as another's, and the stalled wait's
// report says which operation the peer sent (DescribeTag).
const (
	TagCollectivesMin = 1 << 20
	tagRingRS         = TagCollectivesMin + iota
	tagRingAG
	tagRecDoubling
	tagBcast
	tagAllgather
	tagLengthCheck
	TagCollectivesMax = TagCollectivesMin + 1<<10

	tagKinds = 16 // tag kinds per sequence number (6 used)
	// TagSeqMod is how many consecutive collectives have distinct tags.
	TagSeqMod = (TagCollectivesMax - TagCollectivesMin) / tagKinds
)

var tagKindNames = [...]string{
	tagRingRS - TagCollectivesMin:      "ring reduce-scatter",
	tagRingAG - TagCollectivesMin:      "ring all-gather",
	tagRecDoubling - TagCollectivesMin: "recursive doubling",
	tagBcast - TagCollectivesMin:       "broadcast",
	tagAllgather - TagCollectivesMin:   "all-gather",
	tagLengthCheck - TagCollectivesMin: "length check",
}

// Sequencer is implemented by transports that number the collectives run
// over them (collectives/mpi): every rank of a correct program runs the
// same collectives in the same order, so the numbers agree.
type Sequencer interface {
	// NextCollective returns the number of the collective that begins
	// (1, 2, …).
	NextCollective() uint64
}

// seqTags returns the offset that the tags of a collective beginning now
// on c add to their kind: tagKinds × (its number mod TagSeqMod), or 0 on a
// transport that does not number them.
func seqTags(c any) int {
	if s, ok := unwrapTo[Sequencer](c); ok {
		return tagKinds * int(s.NextCollective()%TagSeqMod)
	}
	return 0
}

// DescribeTag reads a collectives' tag: the message kind and the sequence
// number of its collective modulo TagSeqMod; ok is false for a tag outside
// the collectives' range.
func DescribeTag(tag int) (kind string, seqMod uint64, ok bool) {
	if tag < TagCollectivesMin || tag >= TagCollectivesMax {
		return "", 0, false
	}
	t := tag - TagCollectivesMin
	k := t % tagKinds
	if k >= len(tagKindNames) || tagKindNames[k] == "" {
		return "", 0, false
	}
	return tagKindNames[k], uint64(t / tagKinds), true
}

// NearestSeq is the collective number congruent to seqMod (mod TagSeqMod)
// nearest to seq: which collective a peer's message belongs to, seen from
// a rank in collective seq.
func NearestSeq(seq, seqMod uint64) uint64 {
	d := (int64(seqMod) - int64(seq%TagSeqMod) + TagSeqMod) % TagSeqMod
	if d >= TagSeqMod/2 {
		d -= TagSeqMod
	}
	if int64(seq)+d < 0 {
		d += TagSeqMod
	}
	return uint64(int64(seq) + d)
}
