package elastic

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Host is a host and its slots.
type Host struct {
	Name  string `json:"host"`
	Slots int    `json:"slots"`
}

// ParseHosts reads host:slots,…
func ParseHosts(s string) ([]Host, error) {
	var out []Host
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			return nil, fmt.Errorf("%q: an empty host", s)
		}
		name, n, hasN := strings.Cut(f, ":")
		slots := 1
		if hasN {
			v, err := strconv.Atoi(n)
			if err != nil || v < 1 || v > 1<<16 {
				return nil, fmt.Errorf("%q: slots %q: want a number from 1", f, n)
			}
			slots = v
		}
		if !validHostName(name) {
			return nil, fmt.Errorf("%.80q: not a host name (letters, digits, '-' and '.', or an IPv4 address)", f)
		}
		if seen[name] {
			return nil, fmt.Errorf("host %s is given twice", name)
		}
		seen[name] = true
		out = append(out, Host{name, slots})
	}
	return out, nil
}

// validHostName reports whether name is a host name as RFC 1123 writes
// them (labels of letters, digits and '-', not starting or ending with
// '-', at most 63 bytes each, 253 in all) or an IPv4 address.
func validHostName(name string) bool {
	if net.ParseIP(name) != nil && !strings.Contains(name, ":") {
		return true
	}
	if name == "" || len(name) > 253 {
		return false
	}
	for _, l := range strings.Split(name, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// maxDiscoveryBytes bounds what --host-discovery may print (10,000 hosts
// of 100 bytes): more is refused, and the command is not read further.
const maxDiscoveryBytes = 1 << 20

// cappedBuffer keeps the first max bytes written to it; a write past them
// fails, which stops the copying from the command (whose next write then
// fails: `yes` ends).
type cappedBuffer struct {
	b    []byte
	max  int
	over bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if len(c.b)+len(p) > c.max {
		c.over = true
		return 0, errors.New("output too long")
	}
	c.b = append(c.b, p...)
	return len(p), nil
}

// DiscoverHosts runs the discovery command and reads its hosts: one
// host[:slots] a line; empty lines and # comments are skipped.
func DiscoverHosts(command string) ([]Host, error) {
	// Bounded: the supervisor's loop waits for it (a death, a signal).
	ctx, cancel := context.WithTimeout(context.Background(), discoveryTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.WaitDelay = time.Second
	errb := &cappedBuffer{max: 64 << 10}
	outb := &cappedBuffer{max: maxDiscoveryBytes}
	cmd.Stdout, cmd.Stderr = outb, errb
	err := cmd.Run()
	out := outb.b
	if outb.over {
		return nil, fmt.Errorf("%q printed more than %d bytes: want one host[:slots] a line", command, maxDiscoveryBytes)
	}
	if err != nil {
		msg := strings.TrimSpace(string(errb.b))
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		if msg != "" {
			msg = ": " + msg
		}
		return nil, fmt.Errorf("%q: %v%s", command, err, msg)
	}
	var fields []string
	for i, line := range strings.Split(string(out), "\n") {
		if k := strings.IndexByte(line, '#'); k >= 0 {
			line = line[:k]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.ContainsAny(line, " \t,") {
			return nil, fmt.Errorf("%q printed line %d %.80q: want host or host:slots", command, i+1, line)
		}
		if name, _, _ := strings.Cut(line, ":"); !validHostName(name) {
			return nil, fmt.Errorf("%q printed line %d %.80q: not a host name (letters, digits, '-' and '.', or an IPv4 address)", command, i+1, line)
		}
		fields = append(fields, line)
	}
	if len(fields) == 0 {
		return nil, fmt.Errorf("%q printed no host", command)
	}
	hosts, err := ParseHosts(strings.Join(fields, ","))
	if err != nil {
		return nil, fmt.Errorf("%q: %v", command, err)
	}
	return hosts, nil
}

// discoveryTimeout bounds one run of --host-discovery.
const discoveryTimeout = 10 * time.Second

// pool is the hosts and slots a job may run on, less the ones that
// failed: on one machine (--np) a failed rank's slot is left out for good;
// with --hosts a failed rank's whole host is left out for the cool-down.
type pool struct {
	hosts    []Host
	local    bool
	cooldown time.Duration
	out      map[string]time.Time // host → when it may come back
	lost     map[string]int       // host → slots left out for good (--np)
}

// Slots is the hosts' slots in all.
func Slots(hosts []Host) int {
	n := 0
	for _, h := range hosts {
		n += h.Slots
	}
	return n
}

// world is the hosts to run on now, at most max ranks (0: all), in the
// order given, and their ranks.
func (p *pool) world(now time.Time, max int) ([]Host, int) {
	var w []Host
	np := 0
	for _, h := range p.hosts {
		if until, ok := p.out[h.Name]; ok {
			if now.Before(until) {
				continue
			}
			delete(p.out, h.Name)
		}
		s := h.Slots - p.lost[h.Name]
		if max > 0 {
			s = min(s, max-np)
		}
		if s <= 0 {
			continue
		}
		w = append(w, Host{h.Name, s})
		np += s
	}
	return w, np
}

// hostOf is the host rank ran on in world (ranks fill the hosts in order,
// as mpirun maps them by slot), or the name the ring reported where that
// is one of the pool's.
func (p *pool) hostOf(world []Host, rank int, reported string) string {
	if p.local {
		return p.hosts[0].Name
	}
	for _, h := range world {
		if h.Name == reported {
			return reported
		}
	}
	for _, h := range world {
		if rank < h.Slots {
			return h.Name
		}
		rank -= h.Slots
	}
	return ""
}

// rediscover replaces the hosts with what discovery reports now (the
// failed ones stay out for their cool-down).
func (p *pool) rediscover(hosts []Host) { p.hosts = hosts }

// fail leaves host out: one slot of this machine, or the host until the
// cool-down ends.
func (p *pool) fail(host string, now time.Time) {
	if p.local {
		p.lost[host]++
		return
	}
	p.out[host] = now.Add(p.cooldown)
}
