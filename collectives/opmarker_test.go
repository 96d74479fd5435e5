package collectives

import "testing"

type markerComm struct {
	Comm
	ops   []string
	steps []int
}

func (m *markerComm) EnterOp(name string) { m.ops = append(m.ops, name) }
func (m *markerComm) SetStep(step int)    { m.steps = append(m.steps, step) }

type wrapper struct{ Comm }

func (w wrapper) Unwrap() Comm { return w.Comm }

// TestEnterOpSeesThroughWrappers: the marks reach a transport's stall
// inspector directly and through a decorator (trace.Comm), and are a no-op
// on anything else.
func TestEnterOpSeesThroughWrappers(t *testing.T) {
	m := &markerComm{}
	EnterOp(m, "allreduce")
	EnterOp(wrapper{wrapper{m}}, "gossip")
	SetStep(wrapper{m}, 7)
	if len(m.ops) != 2 || m.ops[0] != "allreduce" || m.ops[1] != "gossip" || len(m.steps) != 1 || m.steps[0] != 7 {
		t.Fatalf("marks %v %v", m.ops, m.steps)
	}
	EnterOp(nil, "x")
	EnterOp(wrapper{}, "x") // wraps nothing
	SetStep(42, 1)
}
