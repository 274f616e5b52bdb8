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

	mu         sync.Mutex
	cpuPercent float64 // the VMM's, over the last CPUSampleInterval
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
	c.mu.Lock()
	cpu := c.cpuPercent
	c.mu.Unlock()
	return &protocol.ShimMetrics{Execs: c.execs.Load(), ExecErrors: c.execErrors.Load(),
		StdinBytes: c.stdin.Load(), OutputBytes: c.output.Load(),
		CPUPercent: cpu, MemoryBytes: residentBytes(s.vm.Pid())}
}

// sampleCPU keeps counters.cpuPercent current until the VMM exits: every
// CPUSampleInterval, the CPU time the VMM used in the interval over its
// length. Until the first interval ends it is the boot's average (the CPU
// the VMM used over the wall time of its boot).
func (s *shim) sampleCPU() {
	last, at := s.vm.CPUTime(), time.Now()
	if s.info.BootMs > 0 {
		s.setCPU(last, time.Duration(s.info.BootMs*float64(time.Millisecond)))
	}
	tick := time.NewTicker(protocol.CPUSampleInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.vm.Done():
			s.setCPU(0, 1)
			return
		case now := <-tick.C:
			cpu := s.vm.CPUTime()
			s.setCPU(max(cpu-last, 0), now.Sub(at))
			last, at = cpu, now
		}
	}
}

func (s *shim) setCPU(used, wall time.Duration) {
	if wall <= 0 {
		return
	}
	s.counters.mu.Lock()
	s.counters.cpuPercent = float64(used) / float64(wall) * 100
	s.counters.mu.Unlock()
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
