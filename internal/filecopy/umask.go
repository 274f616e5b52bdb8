package filecopy

import (
	"bytes"
	"os"
	"strconv"
)

// DefaultUmask is what Umask answers where the kernel does not say.
const DefaultUmask = 0o022

// Umask returns the calling process's umask as the kernel reports it in
// /proc/self/status (Linux 4.7 and later). Reading it with umask(2) would
// mean setting it and setting it back, and another thread creating a file
// in between would get the wrong one. Where the kernel does not say, it is
// DefaultUmask (no file a copy makes is writable by others).
func Umask() uint32 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return DefaultUmask
	}
	return parseUmask(b)
}

func parseUmask(status []byte) uint32 {
	for _, line := range bytes.Split(status, []byte("\n")) {
		v, ok := bytes.CutPrefix(line, []byte("Umask:"))
		if !ok {
			continue
		}
		m, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 8, 32)
		if err != nil || m > 0o777 {
			break
		}
		return uint32(m)
	}
	return DefaultUmask
}
