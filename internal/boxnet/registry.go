package boxnet

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// The published-port registry is host-wide: every shim on the host, of
// every home and every user, records each port its box publishes as an
// abstract Unix socket it binds and holds,
//
//	@boxlite/port/v1/PROTO/PORT/HOSTIP/RANDOM
//
// and a port is published while any such socket exists, as the kernel
// lists them in /proc/net/unix. Why sockets and not files under a shared
// directory:
//
//   - The abstract namespace belongs to the network namespace, which is
//     exactly the scope of what the registry protects: the loopback and
//     the addresses a box's stack reaches the host by. A shim in another
//     network namespace has another loopback, and another registry.
//   - Nobody can remove another process's socket: there is no directory
//     whose owner could delete or rename entries, and no file to squat. An
//     entry lives exactly as long as the shim that holds it (a killed
//     shim's entries go with its descriptors).
//   - A forged entry (anyone may bind a name of this form, a name with a
//     newline forges lines) can only make a port read as published: boxes
//     are then refused more, never allowed more. The random part means a
//     name squatted in advance never stops a shim from recording its own.
//
// Reading /proc/net/unix costs a scan of the host's Unix sockets; the
// stack asks only for connections to the host's own addresses.
const registryPrefix = "boxlite/port/v1/"

// procNetUnix lists the network namespace's Unix sockets (a variable for
// tests).
var procNetUnix = "/proc/net/unix"

// Registry records the ports a box publishes in the host-wide registry and
// answers whether a port is any box's. A nil *Registry records nothing and
// knows no ports.
type Registry struct {
	mu   sync.Mutex
	held map[string][]int // portKey -> the descriptors of its sockets
}

// NewRegistry checks that the host's registry can be read.
func NewRegistry() (*Registry, error) {
	f, err := os.Open(procNetUnix)
	if err != nil {
		return nil, errdefs.Errorf(errdefs.ErrUnsupported, "port registry: %v (boxes publishing ports need /proc/net/unix)", err)
	}
	f.Close()
	return &Registry{held: map[string][]int{}}, nil
}

func portKey(p protocol.Port) string {
	proto := p.Protocol
	if proto == "" {
		proto = "tcp"
	}
	return proto + "/" + strconv.Itoa(p.HostPort) + "/" + p.HostIP
}

// Hold records ports (as Publish bound them) as this process's until
// Release or the process's exit.
func (r *Registry) Hold(ports []protocol.Port) (err error) {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var mine []protocol.Port
	defer func() {
		if err != nil {
			r.release(mine)
		}
	}()
	for _, p := range ports {
		fd, err := holdName(registryPrefix + portKey(p) + "/")
		if err != nil {
			return err
		}
		k := portKey(p)
		r.held[k] = append(r.held[k], fd)
		mine = append(mine, p)
	}
	return nil
}

// holdName binds a stream socket (never listening: nobody can connect)
// to the abstract name prefix+RANDOM.
func holdName(prefix string) (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, errdefs.Errorf(errdefs.ErrLimit, "port registry: socket: %v", err)
	}
	for try := 0; ; try++ {
		var b [8]byte
		rand.Read(b[:])
		err = unix.Bind(fd, &unix.SockaddrUnix{Name: "@" + prefix + hex.EncodeToString(b[:])})
		if err == nil {
			return fd, nil
		}
		if err != unix.EADDRINUSE || try == 3 {
			unix.Close(fd)
			return -1, errdefs.Errorf(errdefs.ErrInternal, "port registry: bind @%s...: %v", prefix, err)
		}
	}
}

// Release forgets ports held by this process.
func (r *Registry) Release(ports []protocol.Port) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.release(ports)
}

func (r *Registry) release(ports []protocol.Port) {
	for _, p := range ports {
		k := portKey(p)
		if fds := r.held[k]; len(fds) > 0 {
			unix.Close(fds[len(fds)-1])
			if r.held[k] = fds[:len(fds)-1]; len(r.held[k]) == 0 {
				delete(r.held, k)
			}
		}
	}
}

// Published reports whether a live box on this host (any home, any user)
// publishes port over proto, on any host address. When the registry cannot
// be read, every port counts as published: the box is refused.
func (r *Registry) Published(proto string, port uint16) bool {
	if r == nil {
		return false
	}
	b, err := os.ReadFile(procNetUnix)
	if err != nil {
		return true
	}
	return bytes.Contains(b, []byte(fmt.Sprintf(" @%s%s/%d/", registryPrefix, proto, port)))
}
