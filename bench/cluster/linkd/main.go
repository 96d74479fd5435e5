// Command linkd is the test cluster's switch where the kernel has no netem:
// a user-space Ethernet switch in the switch namespace that forwards frames
// between the hosts' veth ports (AF_PACKET, with virtio-net headers so that
// GSO frames and partial checksums pass through whole), holding each frame
// for the delays of the two links it crosses and dropping it with their
// loss probabilities. The links' rates stay with tc (htb on the ports).
//
//	linkd -port p1=DELAY_UP/DELAY_DOWN/LOSS_UP/LOSS_DOWN -port p2=… (Go durations, fractions)
//
// bench/cluster/up.sh starts it (the ports not in a bridge then); it runs
// until killed.
package main

import (
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

type port struct {
	name               string
	fd                 int
	index              int
	upDelay, downDelay time.Duration
	upLoss, downLoss   float64
	queues             []chan frame // by destination port
}

type frame struct {
	due  time.Time
	data []byte
}

type portsFlag []string

func (p *portsFlag) String() string     { return strings.Join(*p, " ") }
func (p *portsFlag) Set(s string) error { *p = append(*p, s); return nil }

func parsePort(s string) (*port, error) {
	name, spec, ok := strings.Cut(s, "=")
	f := strings.Split(spec, "/")
	if !ok || len(f) != 4 {
		return nil, fmt.Errorf("port %q: want NAME=DELAY_UP/DELAY_DOWN/LOSS_UP/LOSS_DOWN", s)
	}
	p := &port{name: name}
	var err error
	if p.upDelay, err = time.ParseDuration(f[0]); err != nil {
		return nil, err
	}
	if p.downDelay, err = time.ParseDuration(f[1]); err != nil {
		return nil, err
	}
	if p.upLoss, err = strconv.ParseFloat(f[2], 64); err != nil {
		return nil, err
	}
	if p.downLoss, err = strconv.ParseFloat(f[3], 64); err != nil {
		return nil, err
	}
	return p, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func open(p *port) error {
	ifi, err := net.InterfaceByName(p.name)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
		return fmt.Errorf("PACKET_VNET_HDR: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		return fmt.Errorf("PACKET_IGNORE_OUTGOING: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		return err
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 8<<20)
	p.fd, p.index = fd, ifi.Index
	return nil
}

const vnetHdr = 10 // struct virtio_net_hdr

func main() {
	var specs portsFlag
	flag.Var(&specs, "port", "NAME=DELAY_UP/DELAY_DOWN/LOSS_UP/LOSS_DOWN (repeat per port)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("linkd: ")
	sw := &switchState{macs: map[[6]byte]int{}}
	for _, s := range specs {
		p, err := parsePort(s)
		if err != nil {
			log.Fatal(err)
		}
		if err := open(p); err != nil {
			log.Fatalf("%s: %v", p.name, err)
		}
		sw.ports = append(sw.ports, p)
	}
	if len(sw.ports) < 2 {
		log.Fatal("want two ports or more")
	}
	sw.startQueues()
	for i := range sw.ports {
		go sw.receive(i)
	}
	fmt.Fprintln(os.Stderr, "linkd: forwarding between", len(sw.ports), "ports")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	fmt.Fprintf(os.Stderr, "linkd: %d frames forwarded, %d dropped as lost\n", sw.forwarded.Load(), sw.lost.Load())
}

// switchState is the switch: its ports, the MAC addresses it has learned
// and its counts.
type switchState struct {
	ports           []*port
	mu              sync.RWMutex
	macs            map[[6]byte]int // learned: source MAC → port
	forwarded, lost atomic.Int64
}

// startQueues starts one FIFO per (source, destination) port pair: its
// frames all have the same delay, so their order is kept.
func (sw *switchState) startQueues() {
	for _, src := range sw.ports {
		src.queues = make([]chan frame, len(sw.ports))
		for j, dst := range sw.ports {
			if dst == src {
				continue
			}
			q := make(chan frame, 4096)
			src.queues[j] = q
			go func(dst *port) {
				for f := range q {
					if d := time.Until(f.due); d > 0 {
						time.Sleep(d)
					}
					if _, err := unix.Write(dst.fd, f.data); err != nil && err != unix.ENOBUFS {
						log.Printf("%s: %v", dst.name, err)
					}
				}
			}(dst)
		}
	}
}

// receive reads port i's frames, learns their source addresses and
// forwards them: to the port that has the destination, or flooded.
func (sw *switchState) receive(i int) {
	src := sw.ports[i]
	buf := make([]byte, 1<<17)
	for {
		n, err := unix.Read(src.fd, buf)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			log.Fatalf("%s: %v", src.name, err)
		}
		if n < vnetHdr+14 {
			continue
		}
		now := time.Now()
		eth := buf[vnetHdr:n]
		var dmac, smac [6]byte
		copy(dmac[:], eth[0:6])
		copy(smac[:], eth[6:12])
		sw.mu.RLock()
		known, ok := sw.macs[smac]
		sw.mu.RUnlock()
		if !ok || known != i {
			sw.mu.Lock()
			sw.macs[smac] = i
			sw.mu.Unlock()
		}
		sw.mu.RLock()
		to, ok := sw.macs[dmac]
		sw.mu.RUnlock()
		if ok && dmac[0]&1 == 0 {
			if to != i {
				sw.send(i, to, buf[:n], now)
			}
			continue
		}
		for j := range sw.ports { // broadcast, multicast, unknown: flood
			if j != i {
				sw.send(i, j, buf[:n], now)
			}
		}
	}
}

// send queues a copy of frame data from port i to port j, due after the
// two links' delays, unless their loss drops it.
func (sw *switchState) send(i, j int, data []byte, now time.Time) {
	src, dst := sw.ports[i], sw.ports[j]
	if p := 1 - (1-src.upLoss)*(1-dst.downLoss); p > 0 && rand.Float64() < p {
		sw.lost.Add(1)
		return
	}
	sw.forwarded.Add(1)
	select {
	case src.queues[j] <- frame{due: now.Add(src.upDelay + dst.downDelay), data: append([]byte(nil), data...)}:
	default: // queue full: the frame is lost, as on a congested link
	}
}
