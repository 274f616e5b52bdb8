package shim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/boxnet"
	"github.com/boxlite/boxlite/internal/hv"
	"github.com/boxlite/boxlite/internal/jail"
	"github.com/boxlite/boxlite/internal/netpolicy"
	"github.com/boxlite/boxlite/internal/podnet"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/shimapi"
)

// A box's network stack runs in a process of its own, confined like the
// VMM (it parses every frame the guest sends): cmd/boxlite-net (its
// command line and descriptors are boxnet's Proc*), started as
// "/boxlite-net CONFIG" through package jail with the host's network
// namespace (it NATs through host sockets) but its own mount and IPC
// namespaces, a uid of its own when the shim is root, a cgroup, rlimits,
// no_new_privs and seccomp. The shim binds the published ports itself, so
// that a port in use (or a privileged one) is decided before anything
// starts, and answers the stack's registry questions (boxnet.Registry,
// host-wide) itself: the stack needs no view of the host's sockets.
const (
	// netMemoryMax and netPidsMax are the stack's cgroup limits: its
	// buffers (MaxTCPConns connections of at most 2 MiB each) and the Go
	// runtime's threads.
	netMemoryMax = 768 << 20
	netPidsMax   = 128
)

// netProc is the shim's end of the running stack.
type netProc struct {
	cmd      *jail.Cmd
	ports    []*os.File // the listeners, until the stack has them
	registry *boxnet.Registry
	bound    []protocol.Port
	done     chan struct{}
	err      error // set before done is closed

	mu  sync.Mutex // one stats request at a time
	ctl *net.UnixConn
	rd  *bufio.Reader
}

// startNetwork binds the box's published ports and gives its VM a NIC and
// the guest its addresses; the stack itself starts with the VM
// (serveNetwork), which holds the NIC's other end.
func (s *shim) startNetwork(vm *hv.Config) error {
	n := s.cfg.Network
	if n == nil {
		return nil
	}
	if n.NetNS != "" {
		return s.startPodNetwork(vm, n.NetNS)
	}
	if s.cfg.Netstack == "" {
		return fmt.Errorf("network: the shim's config names no network stack binary")
	}
	policy, err := netpolicy.Parse(n.AllowNet)
	if err != nil {
		return err
	}
	reg, err := boxnet.NewRegistry()
	if err != nil {
		return err
	}
	bound, files, err := boxnet.Publish(n.Ports)
	if err != nil {
		return err
	}
	if err := reg.Hold(bound); err != nil {
		for _, f := range files {
			f.Close()
		}
		return err
	}
	s.net = &netProc{ports: files, registry: reg, bound: bound, done: make(chan struct{})}
	vm.NIC = &hv.NIC{MAC: boxnet.GuestMAC}
	vm.Cmdline = strings.TrimSpace(vm.Cmdline + " " + boxnet.GuestConfig(policy.AllowName(netpolicy.HostAlias)))
	s.netInfo = &protocol.NetworkInfo{GuestIP: boxnet.GuestIP.String(), GatewayIP: boxnet.GatewayIP.String(),
		AllowNet: policy.Rules(), Ports: bound}
	if n.Deny {
		s.netInfo.Outbound = "disabled"
	}
	return nil
}

// startPodNetwork gives the VM a NIC on a tap in the network namespace
// ns (internal/podnet), with the namespace's interface's MAC and
// addresses (IPv4 and IPv6), and a further NIC for each further interface
// there; no network stack runs.
func (s *shim) startPodNetwork(vm *hv.Config, ns string) error {
	l, err := podnet.Attach(ns)
	if err != nil {
		return err
	}
	s.podTap = l.Tap // QEMU gets its own copy; closed with the shim
	vm.NIC = &hv.NIC{MAC: l.MAC, Tap: l.Tap}
	word := fmt.Sprintf("%s,%s,%d", l.Addr, l.Gateway, l.MTU)
	for _, a := range l.Addrs6 {
		word += ",v6=" + a.String()
	}
	if l.Gateway6.IsValid() {
		word += ",gw6=" + l.Gateway6.String()
	}
	if len(l.Extra) > 0 {
		word += ",mac=" + l.MAC
	}
	vm.Cmdline = strings.TrimSpace(vm.Cmdline + " " + protocol.NetWord(word))
	// A second network's interfaces: further NICs, no gateway.
	for i, x := range l.Extra {
		s.podTaps = append(s.podTaps, x.Tap)
		vm.ExtraNICs = append(vm.ExtraNICs, hv.NIC{MAC: x.MAC, Tap: x.Tap})
		w := fmt.Sprintf("%s,none,%d,mac=%s", x.Addr, x.MTU, x.MAC)
		for _, a := range x.Addrs6 {
			w += ",v6=" + a.String()
		}
		vm.Cmdline += " " + protocol.ExtraNetWord(i+1, w)
	}
	s.netInfo = &protocol.NetworkInfo{GuestIP: l.Addr.Addr().String(), GatewayIP: l.Gateway.String()}
	return nil
}

// serveNetwork starts the box's network stack on the VM's NIC. If it dies
// while the box runs, the box stops: a box does not lose its network
// silently.
func (s *shim) serveNetwork() error {
	p := s.net
	if p == nil {
		return nil
	}
	nic, err := s.vm.Network().(*net.UnixConn).File()
	if err != nil {
		return fmt.Errorf("network: %w", err)
	}
	defer nic.Close()
	ctl, theirCtl, err := connPair("control")
	if err != nil {
		return err
	}
	defer theirCtl.Close()
	p.ctl, p.rd = ctl, bufio.NewReaderSize(ctl, 4096)
	reg, theirReg, err := connPair("registry")
	if err != nil {
		return err
	}
	defer theirReg.Close()
	go boxnet.AnswerPublished(reg, p.registry.Published)

	secrets, err := s.secretsPipe()
	if err != nil {
		return err
	}
	defer secrets.Close()
	cfg, _ := json.Marshal(boxnet.ProcConfig{AllowNet: s.cfg.Network.AllowNet, Deny: s.cfg.Network.Deny, Ports: p.bound, Secrets: s.cfg.Secrets})
	const inside = "/boxlite-net" // its command name too
	binds := []jail.Bind{{Host: s.cfg.Netstack, Inside: inside}}
	// The stack resolves names for the box as the host does.
	for _, f := range []string{"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf"} {
		if _, err := os.Stat(f); err == nil {
			binds = append(binds, jail.Bind{Host: f})
		}
	}
	spec := jail.Spec{
		Path: inside, Args: []string{inside, string(cfg)}, HostNetwork: true,
		Binds: binds, Devices: []string{"/dev/null", "/dev/urandom"},
		ExtraFiles: append([]*os.File{nic, theirCtl, theirReg, secrets}, p.ports...), Stdout: os.Stderr, Stderr: os.Stderr,
		Cgroup: &jail.CgroupSpec{Name: "boxlite-" + s.cfg.BoxID + ".net", MemoryMaxBytes: netMemoryMax,
			PidsMax: netPidsMax, CPUWeight: 100},
	}
	if os.Geteuid() == 0 {
		uid, release, err := jail.AllocUID(jail.HostUIDDir, jail.UIDRangeLo, jail.UIDRangeHi)
		if err != nil {
			return fmt.Errorf("network: a uid for the stack: %w", err)
		}
		spec.UID, spec.GID = uid, uid
		prev := s.releaseUID
		s.releaseUID = func() {
			release()
			if prev != nil {
				prev()
			}
		}
	}
	p.cmd, err = hv.StartHelper("", spec)
	for _, f := range p.ports {
		f.Close() // the stack has them now (or nobody needs them)
	}
	p.ports = nil
	if err != nil {
		return fmt.Errorf("network: start the stack: %w", err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
		if !exitedSoon(s.vm) {
			s.kill(fmt.Sprintf("the network stack exited: %v", p.err))
		}
	}()
	// The stack says it is up (or why not) before the guest needs it.
	p.ctl.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := p.rd.ReadString('\n')
	p.ctl.SetReadDeadline(time.Time{})
	if err != nil {
		return fmt.Errorf("network: the stack did not start: %v", err)
	}
	var r struct{ Error string }
	if json.Unmarshal([]byte(line), &r) != nil || r.Error != "" {
		return fmt.Errorf("network: the stack did not start: %s", strings.TrimSpace(r.Error+" "+line))
	}
	l := p.cmd.Layers()
	l.NetNS.Applied = true // the host's, by design: it NATs through host sockets
	for _, m := range l.Missing() {
		s.netWarnings = append(s.netWarnings, fmt.Sprintf("network stack confinement: no %s (%s)", m.Name, m.Note))
	}
	return nil
}

// secretsPipe is the stack's secrets descriptor (boxnet.ProcSecretsFD): a
// pipe the box's secrets and the host's trust store are written into (by a
// goroutine: they may exceed the pipe's buffer), or /dev/null for a box
// without secrets. It also keeps the CA's certificate for the agent.
func (s *shim) secretsPipe() (*os.File, error) {
	if !s.cfg.Secrets {
		return os.Open(os.DevNull)
	}
	var sec shimapi.Secrets
	b, err := os.ReadFile(s.cfg.Path(shimapi.SecretsFile))
	if err == nil {
		err = json.Unmarshal(b, &sec)
	}
	clear(b)
	if err != nil {
		return nil, fmt.Errorf("network: the box's secrets: %w", err)
	}
	roots, err := boxnet.HostRoots(shimapi.MaxHostRoots)
	if err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	msg, err := json.Marshal(boxnet.ProcSecrets{Secrets: sec, RootsPEM: string(roots)})
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("network: secrets pipe: %v: %w", err, errdefs.ErrLimit)
	}
	go func() {
		w.SetWriteDeadline(time.Now().Add(30 * time.Second))
		w.Write(msg)
		w.Close()
		clear(msg)
	}()
	s.trustCA = sec.CACertPEM
	return r, nil
}

// connPair is a connected pair of stream sockets: the shim's end, and the
// stack's as a file to hand over.
func connPair(name string) (*net.UnixConn, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("network: %s socket: %v: %w", name, err, errdefs.ErrLimit)
	}
	mine := os.NewFile(uintptr(fds[0]), name)
	c, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("network: %s socket: %w", name, err)
	}
	return c.(*net.UnixConn), os.NewFile(uintptr(fds[1]), name), nil
}

// stats asks the stack for its counters; nil if it does not answer soon.
func (p *netProc) stats() *protocol.NetworkStats {
	if p == nil || p.ctl == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ctl.SetDeadline(time.Now().Add(boxnet.StatsWait))
	defer p.ctl.SetDeadline(time.Time{})
	if _, err := p.ctl.Write([]byte("stats\n")); err != nil {
		return nil
	}
	// The stack is confined, not trusted: a line of at most the reader's
	// buffer, decoded into counters.
	line, err := p.rd.ReadSlice('\n')
	if err != nil {
		return nil
	}
	var st protocol.NetworkStats
	if json.Unmarshal(line, &st) != nil {
		return nil
	}
	return &st
}

// setPolicy has the stack enforce a new outbound policy.
func (p *netProc) setPolicy(pol boxnet.ProcPolicy) error {
	if p == nil || p.ctl == nil {
		return errdefs.Errorf(errdefs.ErrUnsupported, "the box has no network stack")
	}
	b, err := json.Marshal(pol)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ctl.SetDeadline(time.Now().Add(boxnet.StatsWait))
	defer p.ctl.SetDeadline(time.Time{})
	if _, err := p.ctl.Write(append(append([]byte(boxnet.ControlPolicy), b...), '\n')); err != nil {
		return errdefs.Errorf(errdefs.ErrInternal, "network policy: the stack: %v", err)
	}
	line, err := p.rd.ReadSlice('\n')
	if err != nil {
		return errdefs.Errorf(errdefs.ErrInternal, "network policy: the stack did not answer: %v", err)
	}
	var r struct{ Error string }
	if json.Unmarshal(line, &r) != nil {
		return errdefs.Errorf(errdefs.ErrInternal, "network policy: the stack answered %q", truncated(line))
	}
	if r.Error != "" {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "network policy: %s", truncated([]byte(r.Error)))
	}
	return nil
}

func truncated(b []byte) string {
	if len(b) > 256 {
		b = b[:256]
	}
	return strings.ToValidUTF8(string(b), "?")
}

// updateNetwork serves a client's TNetwork: the box's outbound policy from
// now on, answered once the stack enforces it.
func (s *shim) updateNetwork(c *client, stream uint32, f protocol.Frame) {
	var req protocol.NetPolicy
	err := func() error {
		if err := protocol.Decode(f, &req); err != nil {
			return err
		}
		if req.Outbound != "enabled" && req.Outbound != "disabled" {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "update outbound: mode %q: want enabled or disabled", truncated([]byte(req.Outbound)))
		}
		if req.Outbound == "disabled" && len(req.AllowNet) > 0 {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "update outbound: allow_net needs mode enabled")
		}
		pol, err := netpolicy.Parse(req.AllowNet)
		if err != nil {
			return err
		}
		if s.net == nil {
			return errdefs.Errorf(errdefs.ErrUnsupported, "update outbound: box %s was created without a network (no NIC); a running box cannot gain one", s.cfg.BoxID)
		}
		if err := s.net.setPolicy(boxnet.ProcPolicy{AllowNet: req.AllowNet, Deny: req.Outbound == "disabled"}); err != nil {
			return err
		}
		s.mu.Lock()
		n := *s.netInfo
		n.AllowNet, n.Outbound = pol.Rules(), ""
		if req.Outbound == "disabled" {
			n.Outbound = "disabled"
		}
		s.netInfo = &n
		if s.info.Network != nil {
			s.info.Network = &n
		}
		s.mu.Unlock()
		return nil
	}()
	if err != nil {
		c.queueError(stream, err)
		return
	}
	reply, _ := protocol.Encode(protocol.TNetwork, stream, req) // the policy now in force
	c.queue(reply)
}

// stopNetwork ends the stack and frees the box's published ports.
func (s *shim) stopNetwork() {
	p := s.net
	if p == nil {
		return
	}
	for _, f := range p.ports {
		f.Close()
	}
	if p.cmd != nil {
		p.cmd.Process().Kill()
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			log.Printf("network: the stack did not exit after SIGKILL")
		}
	}
	if p.ctl != nil {
		p.ctl.Close()
	}
	p.registry.Release(p.bound)
}

// currentInfo is the box's info with its metrics and the network's counters
// as they are now.
func (s *shim) currentInfo() protocol.Info {
	s.mu.Lock()
	info := s.info // its network changes with updateNetwork
	h := s.health
	s.mu.Unlock()
	if h != nil {
		info.Health = h.status()
	}
	info.Metrics = s.metrics()
	if info.Network != nil {
		n := *info.Network
		n.Stats = s.net.stats()
		info.Network = &n
	}
	return info
}
