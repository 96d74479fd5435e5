package collectives

import "fmt"

// The message tags of every user of a Comm, in one registry: a package
// takes its tags from its range here, so that no two users can read each
// other's messages (TestTagRangesDisjoint). MPI guarantees tags up to
// 32767; the collectives' range above that is checked against the
// transport's limit when MPI starts.
const (
	// TagPSBase: package ps's request, reply and payload messages.
	TagPSBase = 30701
	// TagTrainerBase: the trainer's checkpoint residues, stop vote, stop
	// notes and dpsgd rank states.
	TagTrainerBase = 30711
	// TagGossipBase: D-PSGD's models and AD-PSGD's control and models.
	TagGossipBase = 1 << 18
	// TagTraceBase: the timeline's clock measurement and span gather.
	TagTraceBase = 1 << 19
)

// TagRange is one user's tags: [Lo, Hi).
type TagRange struct {
	Owner  string
	Lo, Hi int
}

// TagRanges lists every range in use, the collectives' own included.
var TagRanges = []TagRange{
	{"ps", TagPSBase, TagPSBase + 4},
	{"trainer (checkpoints, stop vote)", TagTrainerBase, TagTrainerBase + 4},
	{"trainer (gossip)", TagGossipBase, TagGossipBase + 3},
	{"trainer/trace", TagTraceBase, TagTraceBase + 2},
	{"collectives", TagCollectivesMin, TagCollectivesMax + 1},
}

// CheckTagRanges reports the first two ranges that overlap.
func CheckTagRanges(ranges []TagRange) error {
	for i, a := range ranges {
		if a.Lo >= a.Hi {
			return fmt.Errorf("tag range of %s is empty: [%d, %d)", a.Owner, a.Lo, a.Hi)
		}
		for _, b := range ranges[i+1:] {
			if a.Lo < b.Hi && b.Lo < a.Hi {
				return fmt.Errorf("tags of %s [%d, %d) overlap those of %s [%d, %d)", a.Owner, a.Lo, a.Hi, b.Owner, b.Lo, b.Hi)
			}
		}
	}
	return nil
}
