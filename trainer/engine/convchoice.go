package engine

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/trainer/config"
	"github.com/dml-project/dml/trainer/model"
)

// newModel builds the job's model. Where the backend's library
// convolutions are on trial (--kernels auto with a library loaded:
// oneDNN on blas), rank 0 measures each convolution shape both ways
// (model.ChooseConvs) and every rank takes its choice, so that all ranks
// run the same kernels: rank 0 broadcasts [measured, choice…] whenever the
// network has a convolution, whatever its own backend (so no rank waits
// for a broadcast another skips).
func (j *Job) newModel(arch model.Arch, rows int) (*model.Model, error) {
	if err := j.compareProviders(); err != nil {
		return nil, err
	}
	convs := arch.ConvLayers()
	if len(convs) == 0 {
		return model.New(arch, j.Backend, rows)
	}
	words := make([]float32, 1+len(convs))
	if j.Comm.Rank() == 0 {
		choice, timings, err := j.chooseConvs(arch, rows)
		if err != nil {
			return nil, err
		}
		if choice != nil {
			words[0] = 1
			for c, lib := range choice {
				if lib {
					words[1+c] = 1
				}
			}
			isa := ""
			if r, ok := kernels.Innermost(j.Backend).(kernels.DirectISAReporter); ok {
				isa = r.DirectISA()
			}
			j.printf("%s\n", describeChoice(choice, convs, timings, isa))
		}
	}
	if err := collectives.Broadcast(j.Comm, words, 0); err != nil {
		return nil, fmt.Errorf("agreeing on the convolutions' kernels: %w", err)
	}
	var choice model.ConvChoice
	if words[0] == 1 {
		choice = make(model.ConvChoice, len(convs))
		for c := range choice {
			choice[c] = words[1+c] == 1
		}
	}
	return model.NewChosen(arch, j.Backend, rows, choice)
}

// chooseConvs is model.ChooseConvs on rank 0, but where its two trial
// models (one each way, held at once before the job's own) would not fit
// in half the memory left: then the library runs every convolution,
// unmeasured (said in one line), and the choice is nil.
func (j *Job) chooseConvs(arch model.Arch, rows int) (model.ConvChoice, []model.ConvTiming, error) {
	if !kernels.OnTrial(j.Backend) {
		return nil, nil, nil
	}
	need := 2 * modelBytes(arch, j.Cfg.Opt.Kind, rows, false)
	if avail, ok := AvailableMemory(); ok && need > float64(avail)/2 {
		j.printf("convolutions (--kernels auto): not measured (the trial models need %s, %s available): the library runs every one\n", config.GB(need), config.GB(float64(avail)))
		return nil, nil, nil
	}
	return model.ChooseConvs(arch, j.Backend, rows)
}

// describeChoice is the line that says which convolutions the library
// runs, and the times that chose; isa, where not "", the instruction set
// dml's kernels run on.
func describeChoice(choice model.ConvChoice, convs []string, timings []model.ConvTiming, isa string) string {
	lib, own := 0, []string{}
	for c, l := range choice {
		if l {
			lib++
		} else {
			own = append(own, convs[c])
		}
	}
	var ts []string
	for _, t := range timings {
		ts = append(ts, fmt.Sprintf("%s: %.2f/%.2f", t.Layers[0], ms(t.Own), ms(t.Lib)))
	}
	s := fmt.Sprintf("convolutions (--kernels auto, measured per shape, ms dml/library, forward and backward): the library runs %d of %d", lib, len(choice))
	if len(own) > 0 {
		s += "; dml's kernels"
		if isa != "" {
			s += " (" + isa + ")"
		}
		s += " run " + strings.Join(own, ", ")
	}
	return s + " (" + strings.Join(ts, ", ") + ")"
}

func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }

// compareProviders has every rank compare the providers its backend
// loaded (kernels.Describe) with rank 0's, which the start line shows: a
// node where a library did not load runs dml's kernels under --kernels
// auto, and says so here, with rank 0 naming the ranks that differ (the
// job goes on; their results may differ from the others' in the last
// bits). Collective.
func (j *Job) compareProviders() error {
	if j.Comm.Size() == 1 {
		return nil
	}
	mine := kernels.Describe(j.Backend)
	if !strings.Contains(mine, "(") {
		mine += " (no library: dml's own kernels)"
	}
	h := fnv.New64a()
	h.Write([]byte(mine))
	differ, _, err := collectives.Agree(j.Comm, h.Sum64())
	if err != nil {
		return fmt.Errorf("comparing the ranks' kernel providers: %w", err)
	}
	if len(differ) == 0 {
		return nil
	}
	if slices.Contains(differ, j.Comm.Rank()) {
		j.warnf("rank %d runs other kernel providers than rank 0 (a library did not load on this node?): %s", j.Comm.Rank(), mine)
	}
	if j.Comm.Rank() == 0 {
		j.warnf("ranks %v run other kernel providers than rank 0's (%s): each says which; their arithmetic may differ in the last bits", differ, mine)
	}
	return nil
}
