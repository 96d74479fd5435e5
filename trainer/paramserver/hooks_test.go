package paramserver

import (
	"testing"

	"github.com/dml-project/dml/trainer/internal/hookstest"
)

// TestStrategyHooks: which optional parts the parameter-server workers
// have (Strategy.Hooks): among them the stop vote among the workers. The
// other strategies' are checked in their own packages.
func TestStrategyHooks(t *testing.T) {
	hookstest.Check(t, &denseWorker{}, hookstest.Parts{Save: true, Buffers: true, Vote: true, Bytes: true, Reshard: true})
	hookstest.Check(t, &sparseWorker{}, hookstest.Parts{Save: true, Vote: true, Bytes: true})
}
