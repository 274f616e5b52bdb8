package shim

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boxlite/boxlite/internal/protocol"
)

// counters are the box's metrics as the shim counts them
// (protocol.ShimMetrics). The shim sees every exec of every client and every
// byte of their streams, so the counts hold whichever process asks; nothing
// is taken from the guest. A nil *counters counts nothing (police tests).
type counters struct {
	execs, execErrors, stdin, output atomic.Uint64

	// Samples of the VMM's CPU time, taken when metrics are asked for,
	// never on a timer (an idle box's shim does not wake): last is the
	// latest, prev the one before it (at least CPUSampleInterval older).
	mu         sync.Mutex
	prev, last cpuSample
}

// cpuSample is the CPU time the VMM had used at a moment.
type cpuSample struct {
	cpu time.Duration
	at  time.Time
}

// newFlow opens the account of a stream a client opened with a request of
// type kind; an exec counts as one. An attach (TAttach) resumes an exec
// on a new stream: its frames are an exec's, and it is not a new exec.
func (s *shim) newFlow(kind protocol.Type) *flow {
	switch kind {
	case protocol.TExec:
		s.counters.execs.Add(1)
	case protocol.TAttach:
		return &flow{kind: protocol.TExec, resumed: true, m: &s.counters}
	}
	return &flow{kind: kind, m: &s.counters}
}

// refused counts a request the shim turned down before it reached the agent.
func (c *counters) refused(kind protocol.Type) {
	if c != nil && kind == protocol.TExec {
		c.execs.Add(1)
		c.execErrors.Add(1)
	}
}

// failed counts an exec the agent answered with an error before it started.
func (c *counters) failed() {
	if c != nil {
		c.execErrors.Add(1)
	}
}

// stdinBytes and outputBytes count the data of exec streams.
func (c *counters) stdinBytes(n int) {
	if c != nil {
		c.stdin.Add(uint64(n))
	}
}

func (c *counters) outputBytes(n int) {
	if c != nil {
		c.output.Add(uint64(n))
	}
}

// metrics is what the shim reports in its info now.
func (s *shim) metrics() *protocol.ShimMetrics {
	c := &s.counters
	return &protocol.ShimMetrics{Execs: c.execs.Load(), ExecErrors: c.execErrors.Load(),
		StdinBytes: c.stdin.Load(), OutputBytes: c.output.Load(),
		CPUPercent: s.cpuPercent(), MemoryBytes: residentBytes(s.vm.Pid())}
}

// startCPUSamples seeds the CPU samples with the VMM's start (no CPU used
// yet), so the first figure is the average since then.
func (s *shim) startCPUSamples() {
	start := cpuSample{at: time.Now().Add(-time.Duration(s.info.BootMs * float64(time.Millisecond)))}
	s.counters.mu.Lock()
	s.counters.prev, s.counters.last = start, start
	s.counters.mu.Unlock()
}

// cpuPercent is the CPU time the VMM used from the latest sample at least
// CPUSampleInterval old to now, over that wall time (protocol.ShimMetrics);
// now becomes a sample when the latest is that old. 0 once the VMM exited.
func (s *shim) cpuPercent() float64 {
	select {
	case <-s.vm.Done():
		return 0
	default:
	}
	now := cpuSample{cpu: s.vm.CPUTime(), at: time.Now()}
	c := &s.counters
	c.mu.Lock()
	defer c.mu.Unlock()
	base := c.prev
	if now.at.Sub(c.last.at) >= protocol.CPUSampleInterval {
		base = c.last
		c.prev, c.last = c.last, now
	}
	wall := now.at.Sub(base.at)
	if wall <= 0 {
		return 0
	}
	return float64(max(now.cpu-base.cpu, 0)) / float64(wall) * 100
}

// residentBytes is a process's VmRSS from /proc; 0 when it cannot be read
// (the process has exited).
func residentBytes(pid int) uint64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 64<<10)) // the file is ~1.5 KiB
	for sc.Scan() {
		v, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmRSS:"))
		if !ok {
			continue
		}
		fields := bytes.Fields(v) // "12345 kB"
		if len(fields) != 2 || string(fields[1]) != "kB" {
			return 0
		}
		kb, err := strconv.ParseUint(string(fields[0]), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}
