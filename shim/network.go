package shim

import (
	"log"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/boxlite/boxlite/hv"
	"github.com/boxlite/boxlite/netpolicy"
	"github.com/boxlite/boxlite/netstack"
	"github.com/boxlite/boxlite/protocol"
)

// startNetwork builds the box's network stack before its VM exists, so a
// published port already in use fails the start before anything boots, and
// gives the VM its NIC and the guest its addresses.
func (s *shim) startNetwork(vm *hv.Config) error {
	n := s.cfg.Network
	if n == nil {
		return nil
	}
	policy, err := netpolicy.Parse(n.AllowNet)
	if err != nil {
		return err
	}
	reg, err := netstack.NewRegistry(filepath.Join(s.cfg.StateDir, "ports"))
	if err != nil {
		return err
	}
	s.net, err = netstack.New(netstack.Config{Policy: policy, Ports: n.Ports, Registry: reg, Logf: rateLimited(log.Printf)})
	if err != nil {
		return err
	}
	vm.NIC = &hv.NIC{MAC: netstack.GuestMAC}
	vm.Cmdline = strings.TrimSpace(vm.Cmdline + " " + netstack.GuestConfig(policy.AllowName(netpolicy.HostAlias)))
	s.netInfo = &protocol.NetworkInfo{GuestIP: netstack.GuestIP.String(), GatewayIP: netstack.GatewayIP.String(),
		AllowNet: policy.Rules(), Ports: s.net.Ports()}
	return nil
}

// currentInfo is the box's info with the network's counters as they are now.
func (s *shim) currentInfo() protocol.Info {
	info := s.info
	if s.net != nil && info.Network != nil {
		n := *info.Network
		st := s.net.Stats()
		n.Stats = &st
		info.Network = &n
	}
	return info
}

// serveNetwork carries the NIC's frames until the VM ends.
func (s *shim) serveNetwork() {
	if s.net == nil {
		return
	}
	go func() {
		if err := s.net.Serve(s.vm.Network()); err != nil && !s.exitedSoon() {
			log.Printf("network: %v", err)
		}
	}()
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
