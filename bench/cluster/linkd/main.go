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
	var ports []*port
	for _, s := range specs {
		p, err := parsePort(s)
		if err != nil {
			log.Fatal(err)
		}
		if err := open(p); err != nil {
			log.Fatalf("%s: %v", p.name, err)
		}
		ports = append(ports, p)
	}
	if len(ports) < 2 {
		log.Fatal("want two ports or more")
	}
	var forwarded, lost atomic.Int64
	var mu sync.RWMutex
	macs := map[[6]byte]int{} // learned: source MAC → port
	for _, src := range ports {
		src.queues = make([]chan frame, len(ports))
		for j, dst := range ports {
			if dst == src {
				continue
			}
			q := make(chan frame, 4096)
			src.queues[j] = q
			go func(dst *port) { // one FIFO per (source, destination): same delay, order kept
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
	for i, src := range ports {
		go func() {
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
				mu.RLock()
				known, ok := macs[smac]
				mu.RUnlock()
				if !ok || known != i {
					mu.Lock()
					macs[smac] = i
					mu.Unlock()
				}
				mu.RLock()
				to, ok := macs[dmac]
				mu.RUnlock()
				send := func(j int) {
					dst := ports[j]
					if p := 1 - (1-src.upLoss)*(1-dst.downLoss); p > 0 && rand.Float64() < p {
						lost.Add(1)
						return
					}
					forwarded.Add(1)
					data := append([]byte(nil), buf[:n]...)
					select {
					case src.queues[j] <- frame{due: now.Add(src.upDelay + dst.downDelay), data: data}:
					default: // queue full: the frame is lost, as on a congested link
					}
				}
				if ok && dmac[0]&1 == 0 {
					if to != i {
						send(to)
					}
					continue
				}
				for j := range ports { // broadcast, multicast, unknown: flood
					if j != i {
						send(j)
					}
				}
			}
		}()
	}
	fmt.Fprintln(os.Stderr, "linkd: forwarding between", len(ports), "ports")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	fmt.Fprintf(os.Stderr, "linkd: %d frames forwarded, %d dropped as lost\n", forwarded.Load(), lost.Load())
}
