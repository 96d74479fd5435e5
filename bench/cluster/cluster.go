// Package cluster drives the test cluster of bench/cluster/*.sh from Go: N
// hosts as Linux network namespaces on this machine, each joined to a
// switch by a veth link shaped with tc (rate by htb; delay and loss by
// netem where the kernel has it, else by linkd, a user-space switch), and
// one mpirun job across them over TCP.
//
// The scripts do the work (run.sh sets up, runs, tears down); this package
// builds their command lines, so that a Go caller — the sweep, the tests —
// launches a job on the cluster the way it would launch mpirun:
//
//	cmd := cluster.Command(ctx, "bench/cluster", cluster.Spec{Hosts: 4, Link: "1gbit"},
//		"-np", "4", "bin/dml", "bench", "allreduce")
package cluster

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Spec is a cluster: its host count and links.
type Spec struct {
	Hosts int
	// Link is every host's link: RATE[,DELAY[,LOSS]] in tc's units, e.g.
	// "1gbit", "10gbit", "1gbit,200us,0.1%"; RATE is both directions, or
	// UP/DOWN as the host sees them ("20mbit/1gbit": a slow uplink).
	// Delay and loss are set by netem where the kernel has it (see Netem),
	// else by linkd, a user-space switch. Empty: unshaped.
	Link string
	// HostLinks overrides the link of some hosts (1-based), e.g. a slow
	// link to one host as a straggler: {3: "100mbit"}.
	HostLinks map[int]string
	// Name names the namespaces (NAME-sw, NAME-h1…); default "dmlc". Two
	// clusters up at once need different names.
	Name string
	// BestEffort drops delay and loss where neither netem nor linkd can
	// set them instead of failing.
	BestEffort bool
}

// Args are run.sh's flags for s (without the job).
func (s Spec) Args() []string {
	a := []string{"--hosts", strconv.Itoa(s.Hosts)}
	if s.Name != "" {
		a = append(a, "--name", s.Name)
	}
	if s.Link != "" {
		a = append(a, "--link", s.Link)
	}
	hosts := make([]int, 0, len(s.HostLinks))
	for h := range s.HostLinks {
		hosts = append(hosts, h)
	}
	sort.Ints(hosts)
	for _, h := range hosts {
		a = append(a, "--host-link", fmt.Sprintf("%d=%s", h, s.HostLinks[h]))
	}
	if s.BestEffort {
		a = append(a, "--best-effort")
	}
	return a
}

// Command is the command that sets the cluster up, runs mpirun with job
// (mpirun options, then the program and its arguments; without -np one
// rank per host) across its hosts, and takes the cluster down again. dir
// is the folder of the scripts (bench/cluster in the repository). When ctx
// ends, the job's process group gets SIGTERM, and run.sh takes the cluster
// down before it exits.
func Command(ctx context.Context, dir string, s Spec, job ...string) *exec.Cmd {
	args := append(append([]string{filepath.Join(dir, "run.sh")}, s.Args()...), "--")
	cmd := exec.CommandContext(ctx, "bash", append(args, job...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}
	cmd.WaitDelay = 15 * time.Second
	return cmd
}

// Available says why no cluster can be built on this machine (no root or
// CAP_NET_ADMIN, no iproute2), or nil where one can.
func Available(dir string) error {
	out, err := exec.Command("bash", "-c", `. "$1/lib.sh" && cluster_ok`, "cluster", dir).CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if msg == "" {
			msg = err.Error()
		}
		return errors.New(msg)
	}
	return nil
}

// Netem reports whether this kernel has the netem qdisc, which then sets
// links' delay and loss (else linkd, the user-space switch, does).
func Netem(dir string) bool {
	return exec.Command("bash", "-c", `. "$1/lib.sh" && netem_ok`, "cluster", dir).Run() == nil
}
