package boxnet

import (
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/protocol"
)

// TestRegistryHostWide: two registries (two shims, of any homes) see each
// other's ports; a port is free again once released; a name anyone binds
// in the registry's form only makes a port read as published.
func TestRegistryHostWide(t *testing.T) {
	a, err := NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewRegistry()
	bound, files, err := Publish([]protocol.Port{{GuestPort: 80}, {GuestPort: 53, Protocol: "udp"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		defer f.Close()
	}
	tcp, udp := uint16(bound[0].HostPort), uint16(bound[1].HostPort)
	if b.Published("tcp", tcp) || b.Published("udp", udp) {
		t.Fatal("ports read as published before anyone held them")
	}
	if err := a.Hold(bound); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Registry{a, b} {
		if !r.Published("tcp", tcp) || !r.Published("udp", udp) {
			t.Errorf("held ports tcp %d udp %d do not read as published", tcp, udp)
		}
	}
	if b.Published("udp", tcp) || b.Published("tcp", tcp/10) || b.Published("tcp", tcp+1) {
		t.Error("a port nobody holds reads as published")
	}
	a.Release(bound)
	if b.Published("tcp", tcp) || b.Published("udp", udp) {
		t.Error("released ports still read as published")
	}

	// Anyone may bind such a name: the port then reads as published (a
	// box is refused more, never allowed more), and the real holder still
	// records its own.
	fd, _ := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: "@" + registryPrefix + portKey(bound[0]) + "/squatted"}); err != nil {
		t.Fatal(err)
	}
	if !b.Published("tcp", tcp) {
		t.Error("a squatted name does not read as published")
	}
	if err := a.Hold(bound[:1]); err != nil {
		t.Fatalf("hold beside a squatter: %v", err)
	}
	unix.Close(fd)
	if !b.Published("tcp", tcp) {
		t.Error("the squatter's leaving unpublished a port a box still holds")
	}
	a.Release(bound[:1])

	// A registry that cannot be read refuses every port.
	procNetUnix = filepath.Join(t.TempDir(), "missing")
	defer func() { procNetUnix = "/proc/net/unix" }()
	if _, err := NewRegistry(); err == nil {
		t.Error("NewRegistry without /proc/net/unix: no error")
	}
	if !b.Published("tcp", 1) {
		t.Error("an unreadable registry lets a port through")
	}
}

// TestRegistryDiesWithHolder: a held port frees itself when its holder's
// descriptors go, as a killed shim's do.
func TestRegistryDiesWithHolder(t *testing.T) {
	r, _ := NewRegistry()
	p := protocol.Port{Protocol: "tcp", HostIP: "127.0.0.1", HostPort: 1}
	if err := r.Hold([]protocol.Port{p}); err != nil {
		t.Fatal(err)
	}
	if !r.Published("tcp", 1) {
		t.Fatal("not published")
	}
	for _, fd := range r.held[portKey(p)] {
		unix.Close(fd) // what the kernel does at exit
	}
	if r.Published("tcp", 1) {
		t.Error("published after its holder's sockets closed")
	}
}
