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
const (
	TagCollectivesMin = 1 << 20
	tagRingRS         = TagCollectivesMin + iota
	tagRingAG
	tagRecDoubling
	tagBcast
	tagAllgather
	tagLengthCheck
	TagCollectivesMax = TagCollectivesMin + 1<<10
)
