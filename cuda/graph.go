//go:build cuda

package cuda

import (
	"errors"
	"fmt"

	"github.com/dml-project/dml/kernels"
)

// CUDA graphs: a training step recorded once with stream capture and
// replayed with one cuGraphLaunch, so that its few hundred kernels cost
// one launch on the host instead of one each (kernels.GraphOps).

var _ kernels.GraphOps = (*Backend)(nil)

// Graphs reports whether the driver has stream capture (a driver without
// it runs every op one by one).
func (be *Backend) Graphs() bool { return hasGraphs() }

// errCapturing is returned by an op that waits for the device during a
// capture.
var errCapturing = errors.New("cannot wait for the device while a CUDA graph is being captured")

// Capture: see kernels.GraphOps. The memory f's ops use comes from the
// pool as always; what they free returns to it and may be reused by later
// ops (in stream order, as without a graph).
func (be *Backend) Capture(f func() error) (kernels.Graph, error) {
	if err := be.usable("Capture"); err != nil {
		return nil, err
	}
	if !hasGraphs() {
		return nil, be.shapeErr("Capture", "the CUDA driver has no stream capture")
	}
	if be.capturing {
		return nil, be.shapeErr("Capture", "a capture is already under way")
	}
	if err := be.q.beginCapture(); err != nil {
		return nil, be.deviceErr("Capture", "", err)
	}
	be.capturing = true
	ferr := f()
	be.capturing = false
	exec, err := be.q.endCapture(ferr == nil)
	if ferr != nil {
		return nil, fmt.Errorf("capturing a CUDA graph: %w", ferr)
	}
	if err != nil {
		return nil, be.deviceErr("Capture", "", err)
	}
	return &graph{be: be, exec: exec}, nil
}

type graph struct {
	be    *Backend
	exec  graphExec
	freed bool
}

func (g *graph) Launch() error {
	be := g.be
	if g.freed {
		panic("cuda: Launch of a freed graph")
	}
	if err := be.usable("GraphLaunch"); err != nil {
		return err
	}
	return be.done("GraphLaunch", be.q.launchGraph(g.exec))
}

func (g *graph) Free() error {
	if g.freed || g.be.closed {
		g.freed = true
		return nil
	}
	g.freed = true
	return g.be.q.freeGraph(g.exec)
}
