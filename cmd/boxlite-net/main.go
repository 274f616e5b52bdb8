// Command boxlite-net is a box's network stack (package netstack) in a
// process of its own, confined like the VMM: the shim starts it through
// package jail (see boxnet for its command line and descriptors), never
// users. It is a binary of its own so that the shim, which every box runs,
// does not link gVisor and gvisor-tap-vsock (their package inits hold
// megabytes in every process).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/boxlite/boxlite/internal/boxnet"
	"github.com/boxlite/boxlite/internal/netpolicy"
	"github.com/boxlite/boxlite/internal/netstack"
)

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix(fmt.Sprintf("net[%d] ", os.Getpid()))
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: boxlite-net CONFIG (started by a box's shim)")
		os.Exit(2)
	}
	ctl := os.NewFile(boxnet.ProcControl, "netctl")
	fail := func(err error) {
		b, _ := json.Marshal(map[string]string{"error": err.Error()})
		ctl.Write(append(b, '\n'))
		os.Exit(1)
	}
	var cfg boxnet.ProcConfig
	if err := json.Unmarshal([]byte(os.Args[1]), &cfg); err != nil {
		fail(err)
	}
	policy, err := netpolicy.Parse(cfg.AllowNet)
	if err != nil {
		fail(err)
	}
	if cfg.Deny {
		policy = netpolicy.DenyAll()
	}
	// The pure Go resolver: it needs no libc modules inside the jail.
	net.DefaultResolver.PreferGo = true
	var listeners []*os.File
	for i := range cfg.Ports {
		listeners = append(listeners, os.NewFile(uintptr(boxnet.ProcFirstPort+i), "port"))
	}
	var secrets *netstack.Secrets
	if cfg.Secrets {
		if secrets, err = readSecrets(os.NewFile(boxnet.ProcSecretsFD, "netsecrets")); err != nil {
			fail(err)
		}
	}
	st, err := netstack.New(netstack.Config{Policy: policy, Ports: cfg.Ports, Listeners: listeners,
		Published: askRegistry(os.NewFile(boxnet.ProcRegistry, "netreg")), Logf: rateLimited(log.Printf), Secrets: secrets})
	if err != nil {
		fail(err)
	}
	nic, err := net.FileConn(os.NewFile(boxnet.ProcNIC, "nic"))
	if err != nil {
		fail(err)
	}
	ctl.Write([]byte("{}\n"))
	go func() {
		// Stats and policy updates on request, until the shim goes.
		rd := bufio.NewReaderSize(ctl, 64<<10)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				os.Exit(0)
			}
			var b []byte
			if rest, ok := strings.CutPrefix(line, boxnet.ControlPolicy); ok {
				b = []byte("{}")
				if err := setPolicy(st, rest); err != nil {
					b, _ = json.Marshal(map[string]string{"error": err.Error()})
				}
			} else {
				b, _ = json.Marshal(st.Stats())
			}
			ctl.Write(append(b, '\n'))
		}
	}()
	err = st.Serve(nic) // until the VMM closes the NIC
	log.Printf("network: %v", err)
	os.Exit(0)
}

// readSecrets reads the box's secrets from the shim's pipe (boxnet.ProcSecretsFD).
func readSecrets(f *os.File) (*netstack.Secrets, error) {
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, boxnet.MaxProcSecrets+1))
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	if len(b) > boxnet.MaxProcSecrets {
		return nil, fmt.Errorf("secrets: more than %d bytes", boxnet.MaxProcSecrets)
	}
	var ps boxnet.ProcSecrets
	if err := json.Unmarshal(b, &ps); err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	clear(b)
	return netstack.ParseSecrets(ps.Secrets, []byte(ps.RootsPEM))
}

// setPolicy replaces the stack's outbound policy with the ProcPolicy in js.
func setPolicy(st *netstack.Stack, js string) error {
	var p boxnet.ProcPolicy
	if err := json.Unmarshal([]byte(js), &p); err != nil {
		return err
	}
	if p.Deny {
		st.SetPolicy(netpolicy.DenyAll())
		return nil
	}
	pol, err := netpolicy.Parse(p.AllowNet)
	if err != nil {
		return err
	}
	st.SetPolicy(pol)
	return nil
}

// askRegistry asks the shim whether a host port is a box's published one
// (boxnet.AskPublished); without the socket every port counts as one.
func askRegistry(f *os.File) func(string, uint16) bool {
	c, err := net.FileConn(f) // a conn, for deadlines
	f.Close()
	if err != nil {
		return func(string, uint16) bool { return true }
	}
	return boxnet.AskPublished(c, boxnet.StatsWait)
}

// rateLimited passes at most 20 lines a minute on to logf: the network logs
// what the guest does.
func rateLimited(logf func(string, ...any)) func(string, ...any) {
	var window, count atomic.Int64
	return func(format string, args ...any) {
		now := time.Now().Unix() / 60
		if window.Swap(now) != now {
			count.Store(0)
		}
		switch c := count.Add(1); {
		case c <= 20:
			logf(format, args...)
		case c == 21:
			logf("network: more log lines this minute dropped")
		}
	}
}
