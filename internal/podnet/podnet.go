//go:build linux

// Package podnet gives a box the network of a network namespace that CNI
// set up (a Kubernetes pod's): a tap device made in that namespace becomes
// the VM's NIC, and tc redirects every frame arriving on the namespace's
// interface to the tap and every frame from the tap out of the interface
// (Kata Containers' "TC redirect"). The namespace's kernel never sees the
// pod's traffic; the box, which takes the interface's MAC, address,
// gateway and MTU, answers for it. The interface keeps its address in the
// namespace, so CNI's DEL and the kubelet's view are unchanged.
package podnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
)

// TapName is the tap device made in the namespace for its main interface;
// further interfaces' taps are boxlite1, boxlite2, ...
const TapName = "boxlite0"

// Link is what a box takes from the namespace.
type Link struct {
	Tap     *os.File // the tap's queue, for QEMU's -netdev tap,fd=
	MAC     string   // the interface's
	Addr    netip.Prefix
	Gateway netip.Addr // the default route's
	// Addrs6 are the interface's global IPv6 addresses (a dual-stack
	// pod's; at most MaxAddrs6), Gateway6 its IPv6 default route's
	// gateway (invalid: none).
	Addrs6   []netip.Prefix
	Gateway6 netip.Addr
	MTU      int
	Iface    string // the interface's name in the namespace
	// Extra are the namespace's further interfaces (a second network's),
	// each a further NIC of the box on a tap of its own (boxlite1, ...),
	// with no gateway; at most MaxExtra.
	Extra []*Link
	index int
}

// MaxAddrs6 bounds the IPv6 addresses a box takes of an interface.
const MaxAddrs6 = 4

// MaxExtra bounds the further interfaces a box takes.
const MaxExtra = 7

// Attach sets the redirect up in the namespace at path and returns the
// tap. The tap is not persistent: it goes when its last descriptor
// closes (QEMU's end), and with it the redirect's filters on it; the
// interface's own filter then redirects to nothing (dropped) until the
// namespace goes.
func Attach(path string) (*Link, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil || st.Type != unix.NSFS_MAGIC {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "network namespace %s: not a namespace file (%v)", path, err)
	}
	type result struct {
		l   *Link
		err error
	}
	ch := make(chan result, 1)
	// On a thread of its own that joins the namespace (a tap is made in
	// the namespace of the thread that opens it); a thread that cannot
	// go back is left locked, so it ends with the goroutine.
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			ch <- result{nil, fmt.Errorf("network namespace: %w", err)}
			return
		}
		defer orig.Close()
		target, err := netns.GetFromPath(path)
		if err != nil {
			ch <- result{nil, errdefs.Errorf(errdefs.ErrNotFound, "network namespace %s: %v", path, err)}
			return
		}
		defer target.Close()
		if err := netns.Set(target); err != nil {
			ch <- result{nil, fmt.Errorf("enter network namespace %s: %w", path, err)}
			return
		}
		l, err := attachHere()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		if err != nil {
			err = fmt.Errorf("network namespace %s: %w", path, err)
		}
		ch <- result{l, err}
	}()
	r := <-ch
	return r.l, r.err
}

// attachHere works in the calling thread's namespace: the interface with
// the IPv4 default route (CNI's eth0) is the box's NIC; every other one
// with an IPv4 address (a second network's, net1 or eth1) a further NIC.
func attachHere() (_ *Link, err error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, err
	}
	var main *Link
	var extra []*Link
	defer func() {
		if err != nil {
			for _, l := range append(extra, main) {
				if l != nil && l.Tap != nil {
					l.Tap.Close() // the tap goes with it
				}
			}
		}
	}()
	var ifaces []netlink.Link
	for _, l := range links {
		if l.Attrs().Flags&net.FlagLoopback != 0 || strings.HasPrefix(l.Attrs().Name, TapName[:len(TapName)-1]) {
			continue
		}
		if addrs, err := netlink.AddrList(l, netlink.FAMILY_V4); err == nil && len(addrs) > 0 {
			ifaces = append(ifaces, l)
		}
	}
	if len(ifaces) == 0 {
		return nil, errdefs.Errorf(errdefs.ErrNotFound, "no interface with an IPv4 address")
	}
	if len(ifaces) > MaxExtra+1 {
		return nil, errdefs.Errorf(errdefs.ErrUnsupported, "%d interfaces with addresses, at most %d", len(ifaces), MaxExtra+1)
	}
	for _, iface := range ifaces {
		l, err := describe(iface)
		if err != nil {
			return nil, err
		}
		if l.Gateway.IsValid() && main == nil {
			main = l
		} else {
			extra = append(extra, l)
		}
	}
	if main == nil {
		return nil, errdefs.Errorf(errdefs.ErrNotFound, "interface %s: no default route", ifaces[0].Attrs().Name)
	}
	if err := main.attach(TapName); err != nil {
		return nil, err
	}
	for i, l := range extra {
		if err := l.attach(fmt.Sprintf("%s%d", TapName[:len(TapName)-1], i+1)); err != nil {
			return nil, err
		}
	}
	main.Extra = extra
	return main, nil
}

// describe is what the box takes of iface: its MAC, first IPv4 address,
// IPv4 default gateway (invalid: none), MTU and IPv6.
func describe(iface netlink.Link) (*Link, error) {
	name := iface.Attrs().Name
	if len(iface.Attrs().HardwareAddr) != 6 {
		return nil, errdefs.Errorf(errdefs.ErrUnsupported, "interface %s has no Ethernet address", name)
	}
	addrs, err := netlink.AddrList(iface, netlink.FAMILY_V4)
	if err != nil || len(addrs) == 0 {
		return nil, fmt.Errorf("%s: IPv4 addresses: %v", name, err)
	}
	a, _ := netip.AddrFromSlice(addrs[0].IP.To4())
	bits, _ := addrs[0].Mask.Size()
	l := &Link{MAC: iface.Attrs().HardwareAddr.String(), Addr: netip.PrefixFrom(a, bits), MTU: iface.Attrs().MTU, Iface: name, index: iface.Attrs().Index}
	routes, err := netlink.RouteList(iface, netlink.FAMILY_V4)
	if err != nil {
		return nil, err
	}
	for _, r := range routes {
		if (r.Dst == nil || r.Dst.IP.IsUnspecified()) && r.Gw != nil {
			l.Gateway, _ = netip.AddrFromSlice(r.Gw.To4())
		}
	}
	if err := l.ipv6(iface); err != nil {
		return nil, err
	}
	return l, nil
}

// attach makes the tap tapName and redirects l's interface to it and
// back.
func (l *Link) attach(tapName string) error {
	tap := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: tapName, MTU: l.MTU}, Mode: netlink.TUNTAP_MODE_TAP,
		Flags: netlink.TUNTAP_NO_PI, NonPersist: true, Queues: 1}
	if err := netlink.LinkAdd(tap); err != nil {
		return fmt.Errorf("make tap %s: %w", tapName, err)
	}
	if len(tap.Fds) != 1 {
		for _, f := range tap.Fds {
			f.Close()
		}
		return fmt.Errorf("tap %s: %d queues", tapName, len(tap.Fds))
	}
	l.Tap = tap.Fds[0]
	tl, err := netlink.LinkByName(tapName)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetMTU(tl, l.MTU); err != nil {
		return fmt.Errorf("tap %s: mtu: %w", tapName, err)
	}
	if err := netlink.LinkSetUp(tl); err != nil {
		return fmt.Errorf("tap %s: up: %w", tapName, err)
	}
	iface, err := netlink.LinkByIndex(l.index)
	if err != nil {
		return err
	}
	if err := redirect(iface, tl); err != nil {
		return err
	}
	return redirect(tl, iface)
}

// redirect sends every frame arriving on from out of to: an ingress qdisc
// on from and a match-all u32 filter with a mirred egress redirect.
func redirect(from, to netlink.Link) error {
	idx := from.Attrs().Index
	ingress := &netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Parent: netlink.HANDLE_INGRESS, Handle: netlink.MakeHandle(0xffff, 0)}}
	// A new qdisc, without the filters of an earlier box (whose tap is
	// gone): the first matching filter wins.
	if err := netlink.QdiscDel(ingress); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("%s: remove the ingress qdisc: %w", from.Attrs().Name, err)
	}
	if err := netlink.QdiscAdd(ingress); err != nil {
		return fmt.Errorf("%s: ingress qdisc: %w", from.Attrs().Name, err)
	}
	filter := &netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: idx, Parent: netlink.MakeHandle(0xffff, 0), Priority: 1, Protocol: unix.ETH_P_ALL},
		RedirIndex:  to.Attrs().Index,
	}
	if err := netlink.FilterAdd(filter); err != nil {
		return fmt.Errorf("%s: redirect to %s: %w", from.Attrs().Name, to.Attrs().Name, err)
	}
	return nil
}

// ipv6 takes the interface's global IPv6 addresses (not link-local: the
// box makes its own from the same MAC) and its IPv6 default gateway.
func (l *Link) ipv6(iface netlink.Link) error {
	addrs, err := netlink.AddrList(iface, netlink.FAMILY_V6)
	if err != nil {
		return fmt.Errorf("%s: IPv6 addresses: %w", l.Iface, err)
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || !ip.Is6() || ip.IsLinkLocalUnicast() || a.Scope != unix.RT_SCOPE_UNIVERSE {
			continue
		}
		if len(l.Addrs6) == MaxAddrs6 {
			return errdefs.Errorf(errdefs.ErrUnsupported, "interface %s: more than %d IPv6 addresses", l.Iface, MaxAddrs6)
		}
		bits, _ := a.Mask.Size()
		l.Addrs6 = append(l.Addrs6, netip.PrefixFrom(ip, bits))
	}
	if len(l.Addrs6) == 0 {
		return nil
	}
	routes, err := netlink.RouteList(iface, netlink.FAMILY_V6)
	if err != nil {
		return fmt.Errorf("%s: IPv6 routes: %w", l.Iface, err)
	}
	for _, r := range routes {
		if (r.Dst == nil || r.Dst.IP.IsUnspecified()) && r.Gw != nil {
			l.Gateway6, _ = netip.AddrFromSlice(r.Gw)
		}
	}
	return nil
}
