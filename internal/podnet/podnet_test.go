//go:build linux

package podnet

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/boxlite/boxlite/errdefs"
)

func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%q: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestAttach sets a namespace up as CNI's bridge plugin leaves it (an
// eth0 with an address and a default route) and takes it over.
func TestAttach(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("network namespaces need root")
	}
	if _, err := Attach("/etc/hostname"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a plain file: %v, want invalid argument", err)
	}
	ns := fmt.Sprintf("bxlpodnet%d", os.Getpid())
	run(t, "ip", "netns", "add", ns)
	defer exec.Command("ip", "netns", "del", ns).Run() //nolint:errcheck
	run(t, "ip", "-n", ns, "link", "add", "eth0", "mtu", "1450", "type", "veth", "peer", "name", "peer0")
	run(t, "ip", "-n", ns, "link", "set", "eth0", "address", "aa:bb:cc:00:11:22", "up")
	run(t, "ip", "-n", ns, "addr", "add", "10.99.7.5/24", "dev", "eth0")
	run(t, "ip", "-n", ns, "route", "add", "default", "via", "10.99.7.1")
	// Dual stack: a global IPv6 address and default route (the link-local
	// address the kernel makes is not taken).
	run(t, "ip", "-n", ns, "-6", "addr", "add", "fd00:99:7::5/64", "dev", "eth0", "nodad")
	run(t, "ip", "-n", ns, "-6", "route", "add", "default", "via", "fd00:99:7::1")

	l, err := Attach("/var/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Tap.Close()
	if l.MAC != "aa:bb:cc:00:11:22" || l.Addr.String() != "10.99.7.5/24" || l.Gateway.String() != "10.99.7.1" || l.MTU != 1450 || l.Iface != "eth0" {
		t.Errorf("link %+v", l)
	}
	if fmt.Sprint(l.Addrs6) != "[fd00:99:7::5/64]" || l.Gateway6.String() != "fd00:99:7::1" {
		t.Errorf("IPv6: addresses %v, gateway %v", l.Addrs6, l.Gateway6)
	}
	if out := run(t, "ip", "-n", ns, "-o", "link", "show", TapName); !strings.Contains(out, "mtu 1450") {
		t.Errorf("tap: %s", out)
	}
	for dev, to := range map[string]string{"eth0": TapName, TapName: "eth0"} {
		out := run(t, "tc", "-n", ns, "filter", "show", "dev", dev, "ingress")
		if !strings.Contains(out, "Redirect to device "+to) {
			t.Errorf("%s's ingress filter does not redirect to %s:\n%s", dev, to, out)
		}
	}
	// The tap is not persistent: it goes with its descriptor.
	l.Tap.Close()
	if out, err := exec.Command("ip", "-n", ns, "link", "show", TapName).CombinedOutput(); err == nil {
		t.Errorf("the tap outlived its descriptor: %s", out)
	}
	// Again (a box started anew in the namespace): the redirect goes to
	// the new tap only.
	l2, err := Attach("/var/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	out := run(t, "tc", "-n", ns, "filter", "show", "dev", "eth0", "ingress")
	if strings.Count(out, "Redirect to device") != 1 || !strings.Contains(out, "Redirect to device "+TapName) {
		t.Errorf("eth0's ingress filters after a second attach:\n%s", out)
	}
	l2.Tap.Close()
	// A second interface with an address (a second network's): a further
	// NIC on a tap of its own, redirected both ways.
	run(t, "ip", "-n", ns, "link", "add", "eth1", "address", "aa:bb:cc:00:11:33", "type", "veth", "peer", "name", "peer1")
	run(t, "ip", "-n", ns, "link", "set", "eth1", "up")
	run(t, "ip", "-n", ns, "addr", "add", "10.99.8.5/24", "dev", "eth1")
	l3, err := Attach("/var/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	defer l3.Tap.Close()
	if len(l3.Extra) != 1 || l3.Iface != "eth0" || l3.Extra[0].Iface != "eth1" || l3.Extra[0].Addr.String() != "10.99.8.5/24" ||
		l3.Extra[0].MAC != "aa:bb:cc:00:11:33" || l3.Extra[0].Gateway.IsValid() {
		t.Fatalf("two interfaces: %+v, extra %+v", l3, l3.Extra)
	}
	defer l3.Extra[0].Tap.Close()
	for dev, to := range map[string]string{"eth1": "boxlite1", "boxlite1": "eth1"} {
		out := run(t, "tc", "-n", ns, "filter", "show", "dev", dev, "ingress")
		if !strings.Contains(out, "Redirect to device "+to) {
			t.Errorf("%s's ingress filter does not redirect to %s:\n%s", dev, to, out)
		}
	}
}
