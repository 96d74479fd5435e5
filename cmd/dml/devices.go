package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/mpi"
)

// gpuInfo describes the GPUs a rank sees; the CUDA build sets it
// (devices_cuda.go). It returns one line per device, the one the rank
// uses (local rank mod count) marked, and a summary line.
var gpuInfo func(localRank int) (summary string, lines []string, err error)

// errNoCUDABuild is the answer of a binary built without the tag.
var errNoCUDABuild = errors.New("this dml was built without CUDA: build it with `make build-cuda` (go build -tags cuda)")

// cmdDevices lists, rank by rank, the GPUs each rank sees and which one it
// uses: `mpirun -np N dml devices`.
func cmdDevices(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("devices", `dml devices — the GPUs each rank sees (name, memory, compute capability) and which one it uses (local rank mod count)

Usage:
  mpirun -np N dml devices`, stdout)
	if err := parse(fs, args); err != nil {
		return err
	}
	if gpuInfo == nil {
		return errNoCUDABuild
	}
	return withWorld(mpi.DefaultTimeout, func(c collectives.Comm) error {
		host, _ := os.Hostname()
		summary, lines, err := gpuInfo(mpi.LocalRank())
		if err != nil {
			return fmt.Errorf("rank %d (local %d, %s): %w", c.Rank(), mpi.LocalRank(), host, err)
		}
		// One rank at a time, so the ranks' lines do not interleave.
		for r := range c.Size() {
			if r == c.Rank() {
				fmt.Fprintf(stdout, "rank %d (local rank %d, %s): %s\n", c.Rank(), mpi.LocalRank(), host, summary)
				for _, l := range lines {
					fmt.Fprintf(stdout, "  %s\n", l)
				}
			}
			if err := c.Barrier(); err != nil {
				return err
			}
		}
		return nil
	})
}
