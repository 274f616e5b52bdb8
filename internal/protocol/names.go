package protocol

import (
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// The names the host puts where the guest reads them: the agent's port, the
// disks' serials, the file systems' tags, the words of the kernel command
// line, the host's alias. Both sides use these and nothing else; changing
// one is a protocol change (Version).
const (
	// AgentPort is the virtio-serial port that carries this protocol.
	AgentPort = "boxlite.agent"
	// WritableSerial is the box's writable disk; LayerSerial(i) its image
	// layers, from 0 without gaps; LaneSerial the copy lane.
	WritableSerial    = "rw"
	layerSerialPrefix = "layer"
	// FSTagRW and FSTagRO are the virtio-fs devices of the read-write and
	// read-only volumes.
	FSTagRW = "boxlite-rw"
	FSTagRO = "boxlite-ro"
	// HostAliasIP is the host's 127.0.0.1 as a box reaches it, named
	// HostAliasName in its /etc/hosts when its policy allows.
	HostAliasIP   = "192.168.127.254"
	HostAliasName = "host.boxlite.internal"
	// KernelWordPrefix starts every kernel command line word of boxlite's
	// (users' kernel arguments may not); NetWord and VolumeWord are the two.
	KernelWordPrefix = "boxlite."
	netWordPrefix    = KernelWordPrefix + "net="
	volWordPrefix    = KernelWordPrefix + "vol="
	// MaxCmdline is the most a kernel command line holds on x86 (COMMAND_LINE_SIZE, less its NUL).
	MaxCmdline = 2047
)

// LayerSerial is the serial of image layer i's disk.
func LayerSerial(i int) string { return layerSerialPrefix + strconv.Itoa(i) }

// LayerIndex is the layer a disk serial names, if it names one.
func LayerIndex(serial string) (int, bool) {
	n, ok := strings.CutPrefix(serial, layerSerialPrefix)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(n)
	return i, err == nil && i >= 0 && strconv.Itoa(i) == n
}

// CmdlineLen is how many bytes words take on a kernel command line.
func CmdlineLen(words ...string) int {
	n := 0
	for _, w := range words {
		n += len(w) + 1
	}
	return max(n-1, 0)
}

// NetWord tells the agent how to bring its NIC up:
// boxlite.net=IP/BITS,GATEWAY,MTU[,hostalias][,v6=IP6/BITS]...[,gw6=IP6]
// (a dual-stack pod's IPv6 addresses, at most MaxNetAddrs6, and gateway).
func NetWord(config string) string { return netWordPrefix + config }

// MaxNetAddrs6 bounds the IPv6 addresses of a NetWord.
const MaxNetAddrs6 = 4

// MaxExtraNets bounds the ExtraNetWords.
const MaxExtraNets = 7

// ExtraNetWord tells the agent how to bring up its further NIC i (1 to
// MaxExtraNets; a pod's further interface): boxlite.netI=IP/BITS,none,MTU,
// mac=MAC[,v6=IP6/BITS]...; the NIC is the one with that MAC, and gets no
// default route.
func ExtraNetWord(i int, config string) string {
	return fmt.Sprintf("%snet%d=%s", KernelWordPrefix, i, config)
}

// ExtraNetConfigs are the values of the ExtraNetWords among words, in
// order of I.
func ExtraNetConfigs(words []string) []string {
	var out []string
	for i := 1; i <= MaxExtraNets; i++ {
		prefix := fmt.Sprintf("%snet%d=", KernelWordPrefix, i)
		for _, w := range words {
			if v, ok := strings.CutPrefix(w, prefix); ok {
				out = append(out, v)
				break
			}
		}
	}
	return out
}

// NetConfig is the value of the NetWord among words, if there is one.
func NetConfig(words []string) (string, bool) {
	for _, w := range words {
		if v, ok := strings.CutPrefix(w, netWordPrefix); ok {
			return v, true
		}
	}
	return "", false
}

// VolumeWord tells the agent where to mount volume Index of its file
// system: boxlite.vol=INDEX:rw|ro:d|f:GUESTPATH, the path escaped as a URL
// path (the command line has no quoting).
type VolumeWord struct {
	Index     int
	ReadOnly  bool
	File      bool // a regular file, not a directory
	GuestPath string
}

func (v VolumeWord) String() string {
	mode, kind := "rw", "d"
	if v.ReadOnly {
		mode = "ro"
	}
	if v.File {
		kind = "f"
	}
	return fmt.Sprintf("%s%d:%s:%s:%s", volWordPrefix, v.Index, mode, kind, url.PathEscape(v.GuestPath))
}

// HasVolumes says whether a command line names any volume.
func HasVolumes(cmdline string) bool { return strings.Contains(cmdline, volWordPrefix) }

// ParseVolumeWords reads the VolumeWords among words; a malformed one is an error.
func ParseVolumeWords(words []string) ([]VolumeWord, error) {
	var vols []VolumeWord
	for _, w := range words {
		v, ok := strings.CutPrefix(w, volWordPrefix)
		if !ok {
			continue
		}
		f := strings.SplitN(v, ":", 4)
		if len(f) != 4 {
			return nil, fmt.Errorf("volume %q: want INDEX:rw|ro:d|f:PATH", v)
		}
		i, err := strconv.Atoi(f[0])
		p, perr := url.PathUnescape(f[3])
		switch {
		case err != nil || i < 0:
			return nil, fmt.Errorf("volume %q: bad index", v)
		case f[1] != "rw" && f[1] != "ro", f[2] != "d" && f[2] != "f":
			return nil, fmt.Errorf("volume %q: want rw or ro, then d or f", v)
		case perr != nil || !path.IsAbs(p) || path.Clean(p) != p || p == "/":
			return nil, fmt.Errorf("volume %q: bad guest path", v)
		}
		vols = append(vols, VolumeWord{Index: i, ReadOnly: f[1] == "ro", File: f[2] == "f", GuestPath: p})
	}
	return vols, nil
}
