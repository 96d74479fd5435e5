package decentral

import (
	"slices"
	"testing"
)

// TestConsensusState: the weights given, then each optimizer value
// averaged over the ranks.
func TestConsensusState(t *testing.T) {
	got := consensusState([]float32{1, 2}, [][]float32{{9, 9, 3, 4}, {8, 8, 6, 1}, {7, 7, 0, 1}})
	if want := []float32{1, 2, 3, 2}; !slices.Equal(got, want) {
		t.Errorf("consensusState = %v, want %v", got, want)
	}
	if got := consensusState([]float32{1, 2}, [][]float32{{5, 6}, {7, 8}}); !slices.Equal(got, []float32{1, 2}) {
		t.Errorf("without optimizer state: %v", got)
	}
}
