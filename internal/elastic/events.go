package elastic

import (
	"encoding/json"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EventPrefix starts the machine-readable lines a job under dml
// launch prints on stderr (DML_LAUNCH_EVENTS=1): one JSON object each.
const EventPrefix = "dml-launch: "

// launchEvents says whether this rank runs under dml launch:
// DML_LAUNCH_EVENTS is "1" (events on stderr) or tcp:HOST:PORT (events to
// dml launch's socket: mpirun forwards a remote rank's stderr through its
// daemons, which hold it back while they end a failed job, by a second
// and more).
func EventsOn() bool { return os.Getenv("DML_LAUNCH_EVENTS") != "" }

// eventConn is this rank's connection to dml launch's socket (nil: none
// yet, or stderr).
var (
	eventMu   sync.Mutex
	eventConn net.Conn
	eventDead bool // the socket failed: stderr from now on
)

// launchEvent sends one event to dml launch (when it asked for them),
// tagged with the attempt it started (DML_LAUNCH_ATTEMPT).
func Send(ev map[string]any) {
	v := os.Getenv("DML_LAUNCH_EVENTS")
	if v == "" {
		return
	}
	if n, err := strconv.Atoi(os.Getenv("DML_LAUNCH_ATTEMPT")); err == nil {
		ev["attempt"] = n
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return
	}
	line := append([]byte(EventPrefix), append(b, '\n')...)
	eventMu.Lock()
	defer eventMu.Unlock()
	if addr, ok := strings.CutPrefix(v, "tcp:"); ok && !eventDead {
		if eventConn == nil {
			eventConn, err = net.DialTimeout("tcp", addr, 2*time.Second)
		}
		if err == nil {
			eventConn.SetWriteDeadline(time.Now().Add(2 * time.Second))
			if _, err = eventConn.Write(line); err == nil {
				return
			}
		}
		eventDead = true // say it on stderr, as without a socket
	}
	os.Stderr.Write(line)
}
