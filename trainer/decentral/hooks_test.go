package decentral

import (
	"testing"

	"github.com/dml-project/dml/trainer/internal/hookstest"
)

// TestStrategyHooks: which optional parts the decentralized strategies
// have (Strategy.Hooks). The other strategies' are checked in their own
// packages.
func TestStrategyHooks(t *testing.T) {
	hookstest.Check(t, &dpsgdStrategy{LocalModel: &LocalModel{}}, hookstest.Parts{Save: true, Buffers: true, Bytes: true, Reshard: true})
	hookstest.Check(t, &adpsgdStrategy{LocalModel: &LocalModel{}}, hookstest.Parts{Save: true, Buffers: true, Pace: true, Reshard: true})
}
