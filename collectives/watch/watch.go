// Package watch is the liveness ring: it names a rank that died — killed
// outright (SIGKILL, the out-of-memory killer), crashed without a word, or
// on a node that went away — on whatever node it ran, with what it was
// doing when last heard of.
//
// At start-up every rank listens on an ephemeral TCP port (all
// interfaces), the ranks exchange their addresses once (one all-gather,
// done by the transport), and rank r connects to rank (r+1) mod n, its
// successor. Four times a second a goroutine writes to the successor a
// status record: the operation this rank is in, its sequence number and
// the training step, read from the stall inspector's marker (nothing is
// done per step or per operation). The successor's watcher reads them. A
// rank that ends normally sends a "bye" record first (Ring.Bye: at
// MPI_Finalize, before MPI_Abort, on a stop signal). When the connection
// closes without one — the kernel closes a dead process's sockets, on its
// node or across the network — or nothing arrives for Config.Quiet, the
// watcher reports the predecessor dead (Config.OnDeath), and sends a notice
// around the ring, so that every other rank knows the job is over
// (Config.OnNotice) and nobody reports a rank that ended because of it.
//
// It is off in a world of one rank. It does no I/O per step: its cost is a
// read of the operation marker and a small write every Heartbeat.
package watch

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dml-project/dml/collectives/stall"
	"github.com/dml-project/dml/internal/crash"
)

// Record kinds on the wire: a 4-byte header (kind, 0, payload length as a
// big-endian uint16), then the payload.
const (
	kindHello  = 1 // connector → acceptor: nonce, from rank, pid, host
	kindOK     = 2 // acceptor → connector: the hello was right
	kindStatus = 3 // seq, step, op name
	kindBye    = 4 // reason: this rank ends (or was told to): say nothing when its connection closes
	kindDead   = 5 // a death found elsewhere in the ring, passed on
	kindEnding = 6 // origin rank: a rank aborts the job; passed on
)

// Bye reasons.
const (
	ByeEnd    = "end"    // normal end (MPI_Finalize)
	ByeAbort  = "abort"  // this rank aborts the job (it says why itself)
	ByeSignal = "signal" // this rank got a stop signal (the user or the launcher ends the job)
	ByeExit   = "exit"   // this rank ends itself on purpose (it says why itself)
)

// Heartbeat is how often a rank writes its status to its successor (a
// dead rank is named with what it was doing at most this long before).
const Heartbeat = 250 * time.Millisecond

// Death is a rank found dead: what it was doing when last heard of, and
// how it ended.
type Death struct {
	Rank int
	PID  int
	Host string
	// Op is the rank's operation and step at its last status record.
	Op stall.Op
	// Ago is how long before the death was found that record arrived.
	Ago time.Duration
	// Silent: nothing arrived for the quiet limit (a stopped or hung
	// process, or a node or link gone); else its connection closed
	// without a bye (the process ended: killed or crashed).
	Silent bool
	// By is the rank that found it.
	By int
}

func (d Death) String() string {
	how := "ended without a word (killed or crashed, or its node went down)"
	if d.Silent {
		how = fmt.Sprintf("has sent nothing for %v (stopped, hung, or its node or link is down)", d.Ago.Round(time.Second))
	}
	where := ""
	if d.Host != "" {
		where = "on host " + d.Host + ", "
	}
	return fmt.Sprintf("rank %d (pid %d) %s; it was last heard of in %s, %.1fs before (%sfound by rank %d)",
		d.Rank, d.PID, how, d.Op, d.Ago.Seconds(), where, d.By)
}

// Config is what a ring needs from its rank.
type Config struct {
	Rank, Size int
	// Status is what this rank is doing now (the stall inspector's marker).
	Status func() stall.Op
	// Quiet is how long a predecessor may send nothing before it counts as
	// dead; read at every check (nil or ≤ 0: only a closed connection
	// counts).
	Quiet func() time.Duration
	// Heartbeat is how often the status is sent (0: Heartbeat).
	Heartbeat time.Duration
	// OnDeath is called once, on its own goroutine, when this rank finds its
	// predecessor dead, after the notice went to the successor; OnNotice
	// when a notice of a death found by another rank arrives (also once,
	// and only if this rank found none itself). Either may be nil.
	OnDeath, OnNotice func(Death)
	// Logf reports set-up problems (nil: none reported).
	Logf func(format string, args ...any)
}

// Ring is one rank's part of the liveness ring.
type Ring struct {
	cfg   Config
	ln    net.Listener
	nonce uint64
	self  []byte // this rank's address record

	wmu  sync.Mutex // serialises writes to succ
	succ net.Conn
	bye  bool // a bye went out: nothing more is sent
	// connDone is closed once the connection to the successor is made or
	// given up (Bye waits for it: a bye must not be lost to a connection
	// still being made).
	connDone chan struct{}

	closed  chan struct{}
	once    sync.Once
	stopped atomic.Bool
	wg      sync.WaitGroup
	pred    atomic.Pointer[Heard] // the predecessor's latest status

	rmu   sync.Mutex // guards rules
	rules *rules     // what to make of what happens (rules.go)
}

// Heard is what a rank last heard from its predecessor in the ring: its
// rank and its current operation and step, and when.
type Heard struct {
	Rank int
	Op   stall.Op
	At   time.Time
}

// Predecessor is the latest status this rank has from its predecessor, or
// nil before the first.
func (r *Ring) Predecessor() *Heard {
	if r == nil {
		return nil
	}
	return r.pred.Load()
}

// Listen opens this rank's listening port and returns the ring and the
// address record to all-gather (Addr); Start then needs every rank's.
func Listen(cfg Config) (*Ring, error) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		return nil, err
	}
	var nb [8]byte
	rand.Read(nb[:])
	r := &Ring{cfg: cfg, ln: ln, nonce: binary.BigEndian.Uint64(nb[:]), closed: make(chan struct{}), connDone: make(chan struct{})}
	if r.cfg.Heartbeat <= 0 {
		r.cfg.Heartbeat = Heartbeat
	}
	r.rules = newRules(cfg.Rank, cfg.Size, min(r.cfg.Heartbeat, Heartbeat))
	port := ln.Addr().(*net.TCPAddr).Port
	r.self = []byte(fmt.Sprintf("%d|%d|%s", r.nonce, port, strings.Join(localIPs(), ",")))
	return r, nil
}

// AddrSize is the size of an address record (Addr pads to it).
const AddrSize = 1024

// Addr is this rank's address record, AddrSize bytes, for the all-gather.
func (r *Ring) Addr() []byte {
	b := make([]byte, AddrSize)
	copy(b, r.self)
	return b
}

// localIPs lists this host's addresses, those other hosts can reach first
// and loopback last (ranks on this node use it).
func localIPs() []string {
	var far, near []string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLinkLocalUnicast() || n.IP.IsMulticast() || n.IP.IsUnspecified() {
			continue
		}
		if n.IP.IsLoopback() {
			near = append(near, n.IP.String())
		} else {
			far = append(far, n.IP.String())
		}
	}
	if len(near) == 0 {
		near = []string{"127.0.0.1"}
	}
	if len(far)+len(near) > 24 {
		far = far[:max(0, 24-len(near))]
	}
	return append(far, near...)
}

// parseAddr reads an address record.
func parseAddr(b []byte) (nonce uint64, addrs []string, err error) {
	s := strings.TrimRight(string(b), "\x00")
	f := strings.SplitN(s, "|", 3)
	if len(f) != 3 {
		return 0, nil, fmt.Errorf("bad address record %q", s)
	}
	if nonce, err = strconv.ParseUint(f[0], 10, 64); err != nil {
		return 0, nil, err
	}
	for _, ip := range strings.Split(f[2], ",") {
		if ip != "" {
			addrs = append(addrs, net.JoinHostPort(ip, f[1]))
		}
	}
	return nonce, addrs, nil
}

// Start connects to the successor (in the background) and accepts the
// predecessor, given every rank's address record (indexed by rank). It
// returns at once.
func (r *Ring) Start(all [][]byte) {
	n := r.cfg.Size
	pred := (r.cfg.Rank - 1 + n) % n
	succ := (r.cfg.Rank + 1) % n
	nonce, addrs, err := parseAddr(all[succ])
	if err != nil {
		r.logf("rank %d's address: %v", succ, err)
	}
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		defer crash.Recover()
		r.accept(pred)
	}()
	go func() {
		defer r.wg.Done()
		defer crash.Recover()
		if err != nil {
			close(r.connDone)
			return
		}
		r.connect(succ, nonce, addrs)
	}()
}

func (r *Ring) logf(format string, args ...any) {
	if r.cfg.Logf != nil {
		r.cfg.Logf(format, args...)
	}
}

// writeRecord writes one record.
func writeRecord(w io.Writer, kind byte, payload []byte) error {
	b := make([]byte, 4+len(payload))
	b[0] = kind
	binary.BigEndian.PutUint16(b[2:], uint16(len(payload)))
	copy(b[4:], payload)
	_, err := w.Write(b)
	return err
}

// readRecord reads one record.
func readRecord(rd io.Reader) (byte, []byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(rd, h[:]); err != nil {
		return 0, nil, err
	}
	p := make([]byte, binary.BigEndian.Uint16(h[2:]))
	if _, err := io.ReadFull(rd, p); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return h[0], p, nil
}

type hello struct {
	nonce uint64
	rank  int
	pid   int
	host  string
}

func (h hello) encode() []byte {
	return []byte(fmt.Sprintf("dmlw1|%d|%d|%d|%s", h.nonce, h.rank, h.pid, h.host))
}

func decodeHello(p []byte) (hello, error) {
	f := strings.SplitN(string(p), "|", 5)
	if len(f) != 5 || f[0] != "dmlw1" {
		return hello{}, errors.New("not a dml watch hello")
	}
	var h hello
	var err1, err2, err3 error
	h.nonce, err1 = strconv.ParseUint(f[1], 10, 64)
	h.rank, err2 = strconv.Atoi(f[2])
	h.pid, err3 = strconv.Atoi(f[3])
	h.host = f[4]
	return h, errors.Join(err1, err2, err3)
}

// connect dials every address of the successor at once and keeps the first
// connection whose handshake shows the right process (the nonce it
// published), then sends the status every heartbeat until Bye or Close.
func (r *Ring) connect(succ int, nonce uint64, addrs []string) {
	host, _ := os.Hostname()
	hi := hello{nonce: nonce, rank: r.cfg.Rank, pid: os.Getpid(), host: host}.encode()
	found := make(chan net.Conn, len(addrs))
	var wg sync.WaitGroup
	for _, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", a, 5*time.Second)
			if err != nil {
				return
			}
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if writeRecord(c, kindHello, hi) == nil {
				if k, _, err := readRecord(c); err == nil && k == kindOK {
					c.SetDeadline(time.Time{})
					found <- c
					return
				}
			}
			c.Close()
		}()
	}
	go func() { wg.Wait(); close(found) }()
	conn, ok := <-found
	go func() { // close the connections that lost the race
		for c := range found {
			c.Close()
		}
	}()
	if !ok {
		close(r.connDone)
		r.logf("cannot reach rank %d's watch port at %v: a death of rank %d is named by the launcher only", succ, addrs, succ)
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	r.wmu.Lock()
	if r.stopped.Load() {
		r.wmu.Unlock()
		conn.Close()
		close(r.connDone)
		return
	}
	r.succ = conn
	r.wmu.Unlock()
	close(r.connDone)
	t := time.NewTicker(r.cfg.Heartbeat)
	defer t.Stop()
	for {
		r.sendStatus()
		select {
		case <-t.C:
		case <-r.closed:
			return
		}
	}
}

// send writes a record to the successor, unless a bye went out; write
// errors are ignored (a dead successor is its own successor's to report).
func (r *Ring) send(kind byte, payload []byte) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if r.succ == nil || r.bye {
		return
	}
	r.succ.SetWriteDeadline(time.Now().Add(5 * time.Second))
	writeRecord(r.succ, kind, payload)
	if kind == kindBye {
		r.bye = true
	}
}

func (r *Ring) sendStatus() {
	op := stall.Op{Step: -1}
	if r.cfg.Status != nil {
		op = r.cfg.Status()
	}
	p := make([]byte, 16, 16+len(op.Name))
	binary.BigEndian.PutUint64(p, op.Seq)
	binary.BigEndian.PutUint64(p[8:], uint64(int64(op.Step)))
	name := op.Name
	if len(name) > 200 {
		name = name[:200]
	}
	r.send(kindStatus, append(p, name...))
}

// Bye tells the successor that this rank ends on purpose (reason: ByeEnd,
// ByeAbort, ByeSignal, ByeExit): its connection closing is then no death.
// Nothing more is sent after it.
func (r *Ring) Bye(reason string) {
	if r == nil {
		return
	}
	select { // a connection being made at the end of a short run
	case <-r.connDone:
	case <-r.closed:
	case <-time.After(byeWait):
	}
	r.rmu.Lock()
	rec := r.rules.bye(reason) // after an abort or an exit, deaths follow from it
	r.rmu.Unlock()
	r.send(rec.kind, rec.payload)
}

// byeWait bounds how long Bye waits for the connection to the successor
// (its dials give up after 5 s).
const byeWait = 10 * time.Second

// Close stops the ring: this rank no longer watches nor sends (call Bye
// first for a normal end).
func (r *Ring) Close() {
	if r == nil {
		return
	}
	r.once.Do(func() {
		r.stopped.Store(true)
		close(r.closed)
		r.ln.Close()
		r.wmu.Lock()
		if r.succ != nil {
			r.succ.Close()
		}
		r.bye = true
		r.wmu.Unlock()
	})
}

// Gone is the death this rank found or was told of, or nil.
func (r *Ring) Gone() *Death {
	if r == nil {
		return nil
	}
	r.rmu.Lock()
	defer r.rmu.Unlock()
	return r.rules.gone
}

// accept takes the predecessor's connection (the first with the right
// hello; each connection's handshake runs apart, so that a stray one that
// says nothing holds nobody up) and watches it.
func (r *Ring) accept(pred int) {
	var won atomic.Bool
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return // closed: by the winner, or by Close
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer crash.Recover()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			k, p, err := readRecord(c)
			if err != nil || k != kindHello {
				c.Close()
				return
			}
			h, err := decodeHello(p)
			if err != nil || h.nonce != r.nonce || h.rank != pred || !won.CompareAndSwap(false, true) {
				c.Close()
				return
			}
			if writeRecord(c, kindOK, nil) != nil {
				c.Close()
				return
			}
			c.SetDeadline(time.Time{})
			r.ln.Close()
			r.watch(c, h)
		}()
	}
}

// watch reads the predecessor's records until it says bye, its connection
// closes (a death) or it is silent too long (a death), or this ring is
// closed; the rules decide what each event means.
func (r *Ring) watch(c net.Conn, h hello) {
	defer c.Close()
	go func() { <-r.closed; c.Close() }()
	rd := bufio.NewReader(c)
	r.rmu.Lock()
	r.rules.watching(h, time.Now())
	tick := r.rules.tick
	r.rmu.Unlock()
	for {
		c.SetReadDeadline(time.Now().Add(tick))
		k, p, err := readRecord(rd)
		now := time.Now()
		if r.stopped.Load() {
			return
		}
		var ne net.Error
		r.rmu.Lock()
		var e effects
		switch {
		case err == nil:
			e = r.rules.received(now, k, p)
		case errors.As(err, &ne) && ne.Timeout():
			e = r.rules.quietFor(now, r.quiet())
		default:
			e = r.rules.closed(now)
		}
		r.rmu.Unlock()
		if r.apply(e) {
			return
		}
	}
}

// apply carries out the rules' effects and says whether watching is done.
func (r *Ring) apply(e effects) bool {
	for _, rec := range e.send {
		r.send(rec.kind, rec.payload)
	}
	if e.heard != nil {
		r.pred.Store(e.heard)
	}
	if e.death != nil && r.cfg.OnDeath != nil {
		r.cfg.OnDeath(*e.death)
	}
	if e.notice != nil && r.cfg.OnNotice != nil {
		r.cfg.OnNotice(*e.notice)
	}
	return e.done
}

func (r *Ring) quiet() time.Duration {
	if r.cfg.Quiet == nil {
		return 0
	}
	return r.cfg.Quiet()
}

func encodeDeath(d Death) []byte {
	s := 0
	if d.Silent {
		s = 1
	}
	return []byte(fmt.Sprintf("%d|%d|%d|%d|%d|%d|%d|%s|%s", d.Rank, d.PID, d.By, s, d.Ago, d.Op.Seq, d.Op.Step, d.Host, d.Op.Name))
}

func decodeDeath(p []byte) (Death, error) {
	f := strings.SplitN(string(p), "|", 9)
	if len(f) != 9 {
		return Death{}, errors.New("bad death notice")
	}
	var n [7]int64
	for i := range n {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return Death{}, err
		}
		n[i] = v
	}
	return Death{Rank: int(n[0]), PID: int(n[1]), By: int(n[2]), Silent: n[3] == 1, Ago: time.Duration(n[4]),
		Op: stall.Op{Seq: uint64(n[5]), Step: int(n[6]), Name: f[8]}, Host: f[7]}, nil
}

// Wait waits for the ring's goroutines to end (after Close), for tests.
func (r *Ring) Wait() { r.wg.Wait() }
