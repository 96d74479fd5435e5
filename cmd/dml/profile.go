package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/pkg/profile"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/trainer/trace"

	"github.com/dml-project/dml/internal/regfile"
)

// profFlags are the profiling flags every command that runs ranks has
// (train, eval and every bench, through commonFlags or on their own):
// --profile, --profile-dir and --timeline.
type profFlags struct {
	profile    string
	profileDir string
	timeline   string

	rank    int
	rec     *trace.Recorder     // with --timeline
	offsets []time.Duration     // rank 0: each rank's clock minus rank 0's
	prof    interface{ Stop() } // the running pkg/profile
	tmp     string              // pkg/profile's folder, renamed from at the end
}

// profileFiles is the file pkg/profile writes for each mode, and the
// suffix this rank's copy gets (rank-3.cpu.pprof).
var profileFiles = map[string]struct {
	opt            func(*profile.Profile)
	written, named string
}{
	"cpu":   {profile.CPUProfile, "cpu.pprof", "cpu.pprof"},
	"mem":   {profile.MemProfile, "mem.pprof", "mem.pprof"},
	"block": {profile.BlockProfile, "block.pprof", "block.pprof"},
	"mutex": {profile.MutexProfile, "mutex.pprof", "mutex.pprof"},
	"trace": {profile.TraceProfile, "trace.out", "trace"},
}

func (p *profFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.profile, "profile", "", "profile every rank: cpu, mem, block, mutex or trace (pkg/profile); each rank writes rank-N.cpu.pprof, … rank-N.trace into --profile-dir")
	fs.StringVar(&p.profileDir, "profile-dir", ".", "folder for --profile's files (made if missing)")
	fs.StringVar(&p.timeline, "timeline", "", "write a timeline of every rank's spans (forward, backward, each collective, push, pull, waits, update) to this file: Chrome trace-event JSON, merged and clock-aligned by rank 0, for ui.perfetto.dev or chrome://tracing")
}

func (p *profFlags) check() error {
	if _, ok := profileFiles[p.profile]; !ok && p.profile != "" {
		return usageErr("--profile %q: want cpu, mem, block, mutex or trace", p.profile)
	}
	if p.profile != "" && p.profileDir == "" {
		return usageErr("--profile-dir is empty")
	}
	if p.profile != "" {
		// Made (if missing) and tried before MPI starts: a folder that
		// cannot be written is the user's to fix, found before any work.
		if err := os.MkdirAll(p.profileDir, 0o755); err != nil {
			return usageErr("--profile-dir: %v", err)
		}
		if err := checkOutputDir(filepath.Join(p.profileDir, "rank-0."+profileFiles[p.profile].named)); err != nil {
			return usageErr("--profile-dir %s: %v", p.profileDir, err)
		}
	}
	if err := checkOutputDir(p.timeline); err != nil {
		return usageErr("--timeline: %v", err)
	}
	return nil
}

// tracer is the Tracer --timeline records into, or trace.Nop.
func (p *profFlags) tracer() trace.Tracer {
	if p.rec == nil {
		return trace.Nop
	}
	return p.rec
}

// comm is c with a span around every message when --timeline is on (for
// the benches, whose work is messages), else c itself.
func (p *profFlags) comm(c collectives.Comm) collectives.Comm {
	return trace.Comm(c, p.tracer())
}

// begin starts what the flags ask for on every rank of w: the timeline's
// clock measurement (every rank takes part, so begin is called by all at
// the same point) and recorder, then the profile. Its result, deferred
// with the address of the command's error, ends them: it stops the
// profile and names its file for the rank, and, when the command
// succeeded, rank 0 gathers the ranks' spans onto its clock and writes the
// timeline; when it failed, each rank writes its own spans to
// FILE.rank-N.json instead (a peer may be gone: no gather). A failure of
// begin itself ends the command.
func (p *profFlags) begin(w collectives.Comm) (func(*error), error) {
	p.rank = w.Rank()
	if p.timeline != "" {
		offs, err := trace.MeasureOffsets(w, time.Now, trace.ClockRounds)
		if err != nil {
			return nil, fmt.Errorf("--timeline: measuring clock offsets: %w", err)
		}
		p.offsets = offs
		p.rec = trace.NewRecorder(trace.Options{Rank: w.Rank()})
	}
	if p.profile != "" {
		if err := os.MkdirAll(p.profileDir, 0o755); err != nil {
			return nil, fmt.Errorf("--profile-dir: %w", err)
		}
		// pkg/profile writes a fixed name (cpu.pprof) into its folder: a
		// folder of this rank's own, renamed from at the end.
		tmp, err := os.MkdirTemp(p.profileDir, ".rank-"+strconv.Itoa(p.rank)+"-")
		if err != nil {
			return nil, fmt.Errorf("--profile-dir: %w", err)
		}
		p.tmp = tmp
		p.prof = profile.Start(profileFiles[p.profile].opt, profile.ProfilePath(tmp), profile.NoShutdownHook, profile.Quiet)
	}
	return func(errp *error) {
		var err error
		if p.prof != nil {
			err = p.stopProfile()
		}
		if p.rec != nil {
			if e := p.writeTimeline(w, *errp == nil); e != nil && err == nil {
				err = e
			}
		}
		if *errp == nil && err != nil {
			*errp = err
		}
	}, nil
}

// profilePath is rank's --profile file.
func (p *profFlags) profilePath(rank int) string {
	return filepath.Join(p.profileDir, "rank-"+strconv.Itoa(rank)+"."+profileFiles[p.profile].named)
}

func (p *profFlags) stopProfile() error {
	p.prof.Stop()
	p.prof = nil
	dst := p.profilePath(p.rank)
	err := os.Rename(filepath.Join(p.tmp, profileFiles[p.profile].written), dst)
	os.RemoveAll(p.tmp)
	if err != nil {
		return fmt.Errorf("--profile: %w", err)
	}
	return nil
}

// writeTimeline writes the merged timeline (rank 0, after gathering every
// rank's spans) or, when merge is false, this rank's own.
func (p *profFlags) writeTimeline(w collectives.Comm, merge bool) error {
	snap := p.rec.Snapshot()
	if !merge {
		if len(snap.Spans) == 0 {
			return nil // failed before any work: nothing to show
		}
		return writeFile(p.timeline+".rank-"+strconv.Itoa(p.rank)+".json", func(f io.Writer) error {
			return p.rec.WriteChrome(f)
		})
	}
	snaps, err := trace.GatherSnapshots(w, snap, p.offsets)
	if err != nil {
		return fmt.Errorf("--timeline: %w", err)
	}
	if w.Rank() != 0 {
		return nil
	}
	return writeFile(p.timeline, func(f io.Writer) error {
		return trace.WriteMerged(f, p.rec.Origin(), snaps)
	})
}

// ownTimeline writes this rank's own spans to FILE.rank-N.json, as a
// failed command does (for a survivor's last word: the job is about to
// be ended, with no gather); nothing without --timeline.
func (p *profFlags) ownTimeline() {
	if p.rec == nil {
		return
	}
	if err := p.writeTimeline(nil, false); err != nil {
		fmt.Fprintf(os.Stderr, "dml: rank %d: %v\n", p.rank, err)
	}
}

// writeFile writes what fill writes into path, whole or not at all.
func writeFile(path string, fill func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := fill(&buf); err != nil {
		return err
	}
	if err := regfile.WriteFile(path, buf.Bytes()); err != nil {
		return fmt.Errorf("--timeline: %w", err)
	}
	return nil
}
