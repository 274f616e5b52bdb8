//go:build linux

package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/protocol"
)

// netConfig is the box's network as the host gives it on the kernel command
// line: boxlite.net=IP/BITS,GATEWAY,MTU[,hostalias]. Without the word the
// box has no NIC, only lo.
type netConfig struct {
	Addr      netip.Prefix
	Gateway   netip.Addr
	MTU       int
	HostAlias bool // /etc/hosts names host.boxlite.internal
	// Addrs6 and Gateway6: a dual-stack pod's IPv6 addresses and default
	// gateway (invalid: none).
	Addrs6   []netip.Prefix
	Gateway6 netip.Addr
	// MAC, when set, is the NIC's Ethernet address (a box with several
	// NICs); Extra are the further NICs (a pod's further interfaces).
	MAC   string
	Extra []*netConfig
}

const (
	netDir     = boxDir + "/net" // the resolv.conf and hosts the box sees
	nicTimeout = 5 * time.Second
)

// parseNetConfig finds boxlite.net= in cmdline, with the further NICs of
// boxlite.net1= ... (protocol.ExtraNetWord); nil when there is none.
func parseNetConfig(cmdline string) (*netConfig, error) {
	words := splitCmdline(cmdline)
	word, ok := protocol.NetConfig(words)
	if !ok || word == "" {
		return nil, nil
	}
	c, err := parseNetWord(word, false)
	if err != nil {
		return nil, err
	}
	for _, w := range protocol.ExtraNetConfigs(words) {
		x, err := parseNetWord(w, true)
		if err != nil {
			return nil, err
		}
		if x.MAC == "" {
			return nil, fmt.Errorf("boxlite.net%d=%s: a further NIC needs mac=", len(c.Extra)+1, w)
		}
		c.Extra = append(c.Extra, x)
	}
	return c, nil
}

// parseNetWord parses IP/BITS,GATEWAY,MTU[,option]...; a further NIC's
// gateway is "none".
func parseNetWord(word string, extra bool) (*netConfig, error) {
	f := strings.Split(word, ",")
	if len(f) < 3 {
		return nil, fmt.Errorf("boxlite.net=%s: want IP/BITS,GATEWAY,MTU", word)
	}
	c := &netConfig{}
	var err error
	if c.Addr, err = netip.ParsePrefix(f[0]); err != nil {
		return nil, fmt.Errorf("boxlite.net address: %w", err)
	}
	if !extra || f[1] != "none" {
		if c.Gateway, err = netip.ParseAddr(f[1]); err != nil {
			return nil, fmt.Errorf("boxlite.net gateway: %w", err)
		}
	}
	if c.MTU, err = strconv.Atoi(f[2]); err != nil || c.MTU < 576 || c.MTU > 65535 {
		return nil, fmt.Errorf("boxlite.net mtu %q is not 576..65535", f[2])
	}
	for _, o := range f[3:] {
		k, v, _ := strings.Cut(o, "=")
		switch k {
		case "hostalias":
			c.HostAlias = true
		case "mac":
			hw, err := net.ParseMAC(v)
			if err != nil || len(hw) != 6 {
				return nil, fmt.Errorf("boxlite.net mac %q: not an Ethernet address", v)
			}
			c.MAC = hw.String()
		case "v6":
			p, err := netip.ParsePrefix(v)
			if err != nil || !p.Addr().Is6() || p.Addr().Is4In6() || len(c.Addrs6) == protocol.MaxNetAddrs6 {
				return nil, fmt.Errorf("boxlite.net IPv6 address %q: not an IPv6 prefix, or more than %d", v, protocol.MaxNetAddrs6)
			}
			c.Addrs6 = append(c.Addrs6, p)
		case "gw6":
			if c.Gateway6, err = netip.ParseAddr(v); err != nil || !c.Gateway6.Is6() {
				return nil, fmt.Errorf("boxlite.net IPv6 gateway %q: not an IPv6 address", v)
			}
		}
	}
	return c, nil
}

// up brings the virtio NIC up with the host's address, MTU and default
// route, and the further NICs with theirs. Static: the stack's DHCP would
// cost a round trip per boot.
func (c *netConfig) up() error {
	if err := c.upOne(); err != nil {
		return err
	}
	for _, x := range c.Extra {
		if err := x.upOne(); err != nil {
			return err
		}
	}
	return nil
}

// link waits for the NIC: the one with c.MAC, else the first device.
func (c *netConfig) link() (netlink.Link, error) {
	deadline := time.Now().Add(nicTimeout)
	for {
		links, err := netlink.LinkList()
		if err != nil {
			return nil, fmt.Errorf("list links: %w", err)
		}
		for _, l := range links {
			if l.Type() == "device" && l.Attrs().Name != "lo" && (c.MAC == "" || l.Attrs().HardwareAddr.String() == c.MAC) {
				return l, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no network device %s after %s (is virtio_net loaded?)", c.MAC, nicTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *netConfig) upOne() error {
	link, err := c.link()
	if err != nil {
		return err
	}
	name := link.Attrs().Name
	if err := netlink.LinkSetMTU(link, c.MTU); err != nil {
		return fmt.Errorf("%s: mtu %d: %w", name, c.MTU, err)
	}
	ip := net.IP(c.Addr.Addr().AsSlice())
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(c.Addr.Bits(), 32)}}
	if err := netlink.AddrAdd(link, addr); err != nil {
		return fmt.Errorf("%s: address %s: %w", name, c.Addr, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("%s: up: %w", name, err)
	}
	if c.Gateway.IsValid() {
		route := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: net.IP(c.Gateway.AsSlice())}
		if err := netlink.RouteAdd(route); err != nil {
			return fmt.Errorf("%s: default route via %s: %w", name, c.Gateway, err)
		}
	}
	// IPv6: the pod's addresses, without duplicate address detection (the
	// pod's namespace did it; it would hold them back a second or more).
	for _, p := range c.Addrs6 {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), 128)}, Flags: unix.IFA_F_NODAD}
		if err := netlink.AddrAdd(link, a); err != nil {
			return fmt.Errorf("%s: address %s: %w", name, p, err)
		}
	}
	if c.Gateway6.IsValid() {
		route := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: net.IP(c.Gateway6.AsSlice())}
		if err := netlink.RouteAdd(route); err != nil {
			return fmt.Errorf("%s: IPv6 default route via %s: %w", name, c.Gateway6, err)
		}
	}
	return nil
}

// bindNetFiles gives the box's /etc/resolv.conf and /etc/hosts, bind-mounted
// over the image's (which stay as they are on its layers): the stack's DNS,
// and the host alias when the box may reach the host.
func (c *netConfig) bindNetFiles(b *box) error {
	root := b.Root
	if err := os.MkdirAll(netDir, 0o755); err != nil {
		return err
	}
	hosts := "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	if c.HostAlias {
		hosts += protocol.HostAliasIP + "\t" + protocol.HostAliasName + "\n"
	}
	files := []struct{ name, content string }{
		{"resolv.conf", "nameserver " + c.Gateway.String() + "\n"},
		{"hosts", hosts},
	}
	etc, err := boxFile(root, "/etc", true)
	if err != nil {
		return fmt.Errorf("/etc: %w", err)
	}
	for _, f := range files {
		src := filepath.Join(netDir, f.name)
		if err := os.WriteFile(src, []byte(f.content), 0o644); err != nil {
			return err
		}
		target := filepath.Join(etc, f.name)
		if err := bindFileOver(src, target); err != nil {
			return fmt.Errorf("/etc/%s: %w", f.name, err)
		}
		b.mounts = append(b.mounts, target)
	}
	return nil
}

// boxFile resolves the box path p inside root (symlinks stay inside it),
// making it a directory when dir is set and it does not exist.
func boxFile(root, p string, dir bool) (string, error) {
	host, err := resolveIn(root, p)
	if errors.Is(err, fs.ErrNotExist) && dir {
		if err := os.MkdirAll(filepath.Join(root, p), 0o755); err != nil {
			return "", err
		}
		host, err = resolveIn(root, p)
	}
	return host, err
}

// bindFileOver bind-mounts src over target, a file in a directory of the box
// root. A target that is missing or not a regular file (a symlink could point
// anywhere, and mount follows symlinks) is replaced by an empty file first,
// on the box's writable layer; the mount goes through an O_PATH descriptor,
// so nothing is followed.
func bindFileOver(src, target string) error {
	fi, err := os.Lstat(target)
	if err == nil && !fi.Mode().IsRegular() {
		if fi.IsDir() {
			return fmt.Errorf("is a directory in the image")
		}
		if err := os.Remove(target); err != nil {
			return err
		}
	}
	if err != nil || !fi.Mode().IsRegular() {
		f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY|unix.O_NOFOLLOW, 0o644)
		if err != nil {
			return err
		}
		f.Close()
	}
	fd, err := unix.Open(target, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("not a regular file")
	}
	return unix.Mount(src, "/proc/self/fd/"+strconv.Itoa(fd), "", unix.MS_BIND, "")
}
