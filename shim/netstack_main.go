package shim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boxlite/boxlite/netpolicy"
	"github.com/boxlite/boxlite/netstack"
)

// The network stack's own process (see network.go for the shim's side).

// NetworkMain runs the box's network stack when the shim binary was
// started as one (see netProcArg); otherwise it returns at once. It never
// returns when it runs.
func NetworkMain() {
	if len(os.Args) != 3 || os.Args[1] != netProcArg {
		return
	}
	log.SetPrefix(fmt.Sprintf("net[%d] ", os.Getpid()))
	ctl := os.NewFile(4, "netctl")
	fail := func(err error) {
		b, _ := json.Marshal(map[string]string{"error": err.Error()})
		ctl.Write(append(b, '\n'))
		os.Exit(1)
	}
	var cfg netProcConfig
	if err := json.Unmarshal([]byte(os.Args[2]), &cfg); err != nil {
		fail(err)
	}
	policy, err := netpolicy.Parse(cfg.AllowNet)
	if err != nil {
		fail(err)
	}
	// The pure Go resolver: it needs no libc modules inside the jail.
	net.DefaultResolver.PreferGo = true
	var listeners []*os.File
	for i := range cfg.Ports {
		listeners = append(listeners, os.NewFile(uintptr(netFirstPort+i), "port"))
	}
	st, err := netstack.New(netstack.Config{Policy: policy, Ports: cfg.Ports, Listeners: listeners,
		Published: askRegistry(os.NewFile(5, "netreg")), Logf: rateLimited(log.Printf)})
	if err != nil {
		fail(err)
	}
	nic, err := net.FileConn(os.NewFile(3, "nic"))
	if err != nil {
		fail(err)
	}
	ctl.Write([]byte("{}\n"))
	go func() {
		// Stats on request, until the shim goes.
		rd := bufio.NewReader(ctl)
		for {
			if _, err := rd.ReadString('\n'); err != nil {
				os.Exit(0)
			}
			b, _ := json.Marshal(st.Stats())
			ctl.Write(append(b, '\n'))
		}
	}()
	err = st.Serve(nic) // until the VMM closes the NIC
	log.Printf("network: %v", err)
	os.Exit(0)
}

// askRegistry asks the shim whether a host port is a box's published one;
// when the shim does not answer, it is (the connection is refused).
func askRegistry(f *os.File) func(string, uint16) bool {
	c, err := net.FileConn(f) // a conn, for deadlines
	f.Close()
	if err != nil {
		return func(string, uint16) bool { return true }
	}
	var mu sync.Mutex
	rd := bufio.NewReaderSize(c, 64)
	return func(proto string, port uint16) bool {
		mu.Lock()
		defer mu.Unlock()
		c.SetDeadline(time.Now().Add(netStatsWait))
		if _, err := fmt.Fprintf(c, "%s %d\n", proto, port); err != nil {
			return true
		}
		line, err := rd.ReadString('\n')
		return err != nil || line != "0\n"
	}
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
