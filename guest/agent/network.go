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
}

const (
	netDir     = boxDir + "/net" // the resolv.conf and hosts the box sees
	nicTimeout = 5 * time.Second
)

// parseNetConfig finds boxlite.net= in cmdline; nil when there is none.
func parseNetConfig(cmdline string) (*netConfig, error) {
	word, ok := protocol.NetConfig(splitCmdline(cmdline))
	if !ok || word == "" {
		return nil, nil
	}
	f := strings.Split(word, ",")
	if len(f) < 3 {
		return nil, fmt.Errorf("boxlite.net=%s: want IP/BITS,GATEWAY,MTU", word)
	}
	c := &netConfig{}
	var err error
	if c.Addr, err = netip.ParsePrefix(f[0]); err != nil {
		return nil, fmt.Errorf("boxlite.net address: %w", err)
	}
	if c.Gateway, err = netip.ParseAddr(f[1]); err != nil {
		return nil, fmt.Errorf("boxlite.net gateway: %w", err)
	}
	if c.MTU, err = strconv.Atoi(f[2]); err != nil || c.MTU < 576 || c.MTU > 65535 {
		return nil, fmt.Errorf("boxlite.net mtu %q is not 576..65535", f[2])
	}
	for _, o := range f[3:] {
		c.HostAlias = c.HostAlias || o == "hostalias"
	}
	return c, nil
}

// up brings the virtio NIC up with the host's address, MTU and default
// route. Static: the stack's DHCP would cost a round trip per boot.
func (c *netConfig) up() error {
	var link netlink.Link
	deadline := time.Now().Add(nicTimeout)
	for {
		links, err := netlink.LinkList()
		if err != nil {
			return fmt.Errorf("list links: %w", err)
		}
		for _, l := range links {
			if l.Type() == "device" && l.Attrs().Name != "lo" {
				link = l
				break
			}
		}
		if link != nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no network device after %s (is virtio_net loaded?)", nicTimeout)
		}
		time.Sleep(10 * time.Millisecond)
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
	route := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: net.IP(c.Gateway.AsSlice())}
	if err := netlink.RouteAdd(route); err != nil {
		return fmt.Errorf("%s: default route via %s: %w", name, c.Gateway, err)
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
