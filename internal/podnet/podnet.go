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

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
)

// TapName is the tap device made in the namespace.
const TapName = "boxlite0"

// Link is what a box takes from the namespace.
type Link struct {
	Tap     *os.File // the tap's queue, for QEMU's -netdev tap,fd=
	MAC     string   // the interface's
	Addr    netip.Prefix
	Gateway netip.Addr // the default route's
	MTU     int
	Iface   string // the interface's name in the namespace
}

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

// attachHere works in the calling thread's namespace.
func attachHere() (_ *Link, err error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, err
	}
	// The interface: the one with an IPv4 address that is not lo (CNI's
	// eth0). One only: a pod with several interfaces is not supported.
	var iface netlink.Link
	var addr netip.Prefix
	for _, l := range links {
		if l.Attrs().Flags&net.FlagLoopback != 0 || l.Attrs().Name == TapName {
			continue
		}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
		if err != nil || len(addrs) == 0 {
			continue
		}
		if iface != nil {
			return nil, errdefs.Errorf(errdefs.ErrUnsupported, "interfaces %s and %s both have addresses: one only", iface.Attrs().Name, l.Attrs().Name)
		}
		iface = l
		a, _ := netip.AddrFromSlice(addrs[0].IP.To4())
		bits, _ := addrs[0].Mask.Size()
		addr = netip.PrefixFrom(a, bits)
	}
	if iface == nil {
		return nil, errdefs.Errorf(errdefs.ErrNotFound, "no interface with an IPv4 address")
	}
	if len(iface.Attrs().HardwareAddr) != 6 {
		return nil, errdefs.Errorf(errdefs.ErrUnsupported, "interface %s has no Ethernet address", iface.Attrs().Name)
	}
	var gw netip.Addr
	routes, err := netlink.RouteList(iface, netlink.FAMILY_V4)
	if err != nil {
		return nil, err
	}
	for _, r := range routes {
		if (r.Dst == nil || r.Dst.IP.IsUnspecified()) && r.Gw != nil {
			gw, _ = netip.AddrFromSlice(r.Gw.To4())
		}
	}
	if !gw.IsValid() {
		return nil, errdefs.Errorf(errdefs.ErrNotFound, "interface %s: no default route", iface.Attrs().Name)
	}
	l := &Link{MAC: iface.Attrs().HardwareAddr.String(), Addr: addr, Gateway: gw, MTU: iface.Attrs().MTU, Iface: iface.Attrs().Name}

	tap := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: TapName, MTU: l.MTU}, Mode: netlink.TUNTAP_MODE_TAP,
		Flags: netlink.TUNTAP_NO_PI, NonPersist: true, Queues: 1}
	if err := netlink.LinkAdd(tap); err != nil {
		return nil, fmt.Errorf("make tap %s: %w", TapName, err)
	}
	defer func() {
		if err != nil {
			for _, f := range tap.Fds {
				f.Close() // the tap goes with it
			}
		}
	}()
	if len(tap.Fds) != 1 {
		return nil, fmt.Errorf("tap %s: %d queues", TapName, len(tap.Fds))
	}
	tl, err := netlink.LinkByName(TapName)
	if err != nil {
		return nil, err
	}
	if err := netlink.LinkSetMTU(tl, l.MTU); err != nil {
		return nil, fmt.Errorf("tap %s: mtu: %w", TapName, err)
	}
	if err := netlink.LinkSetUp(tl); err != nil {
		return nil, fmt.Errorf("tap %s: up: %w", TapName, err)
	}
	if err := redirect(iface, tl); err != nil {
		return nil, err
	}
	if err := redirect(tl, iface); err != nil {
		return nil, err
	}
	l.Tap = tap.Fds[0]
	return l, nil
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
