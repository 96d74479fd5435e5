package cpu

import (
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/optim"
)

// Optimize applies the update u (package optim's rule: the same code the
// parameter server runs) to w with gradient g and the rule's state s; this
// method only checks shapes.
func (be *Backend) Optimize(w, g, s kernels.Buffer, u optim.Update) error {
	op := kernels.OptimizeOp(u.Kind)
	if !u.Kind.Valid() {
		return shapeError(op, "no such rule")
	}
	wv, gv := be.data(w), be.data(g)
	var sv []float32
	per := u.Kind.StatePer()
	if per > 0 {
		sv = be.data(s)
	}
	if err := firstError(
		checkLen(op, "g", len(gv), len(wv)),
		checkLen(op, "state", len(sv), per*len(wv)),
	); err != nil {
		return err
	}
	u.Apply(wv, gv, sv)
	return nil
}
