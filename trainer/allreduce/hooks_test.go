package allreduce

import (
	"testing"

	"github.com/dml-project/dml/trainer/decentral"
	"github.com/dml-project/dml/trainer/internal/hookstest"
)

// TestStrategyHooks: which optional parts the allreduce strategies have
// (Strategy.Hooks, once found by type assertions). The other strategies'
// are checked in their own packages.
func TestStrategyHooks(t *testing.T) {
	hookstest.Check(t, &allreduceStrategy{}, hookstest.Parts{Save: true, Buffers: true, Bytes: true, Reshard: true})
	hookstest.Check(t, &localSGDStrategy{LocalModel: &decentral.LocalModel{}}, hookstest.Parts{Save: true, Buffers: true, Bytes: true, Reshard: true})
}
