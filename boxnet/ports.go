package boxnet

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/protocol"
)

// Publish binds the box's published ports on the host (before the box
// boots, so that a port in use fails the start at once) and returns them as
// bound, with the listening sockets as files to hand to New, in the same
// order. A port in use is an ErrAlreadyExists naming it.
func Publish(ports []protocol.Port) (bound []protocol.Port, files []*os.File, err error) {
	defer func() {
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			files = nil
		}
	}()
	for _, p := range ports {
		if p.HostIP == "" {
			p.HostIP = "127.0.0.1"
		}
		if p.Protocol == "" {
			p.Protocol = "tcp"
		}
		addr := net.JoinHostPort(p.HostIP, strconv.Itoa(p.HostPort))
		var f *os.File
		switch p.Protocol {
		case "udp":
			pc, err := net.ListenPacket("udp4", addr)
			if err != nil {
				return nil, files, portError(p, err)
			}
			p.HostPort = pc.LocalAddr().(*net.UDPAddr).Port
			f, err = pc.(*net.UDPConn).File()
			pc.Close()
			if err != nil {
				return nil, files, err
			}
		default:
			ln, err := net.Listen("tcp4", addr)
			if err != nil {
				return nil, files, portError(p, err)
			}
			p.HostPort = ln.Addr().(*net.TCPAddr).Port
			f, err = ln.(*net.TCPListener).File()
			ln.Close()
			if err != nil {
				return nil, files, err
			}
		}
		bound, files = append(bound, p), append(files, f)
	}
	return bound, files, nil
}

func portError(p protocol.Port, err error) error {
	what := fmt.Sprintf("host port %s:%d/%s", p.HostIP, p.HostPort, p.Protocol)
	if p.HostIP == "" {
		what = fmt.Sprintf("host port %d/%s", p.HostPort, p.Protocol)
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return errdefs.Errorf(errdefs.ErrAlreadyExists, "publish %s: already in use", what)
	}
	if errors.Is(err, syscall.EACCES) {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "publish %s: permission denied (ports below 1024 need privileges)", what)
	}
	return errdefs.Errorf(errdefs.ErrInvalidArgument, "publish %s: %v", what, err)
}

// Registry records which host ports boxes publish, one file each under a
// directory shared by the home's shims, flock'ed by the shim that holds it
// (so a killed shim's ports free themselves). A nil *Registry records
// nothing.
type Registry struct {
	dir  string
	mu   sync.Mutex
	held map[string]*os.File
}

// NewRegistry keeps the registry in dir.
func NewRegistry(dir string) (*Registry, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return &Registry{dir: dir, held: map[string]*os.File{}}, nil
}

func portFile(proto string, port int) string { return proto + "-" + strconv.Itoa(port) }

// Hold records ports as this process's.
func (r *Registry) Hold(ports []protocol.Port) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range ports {
		name := portFile(p.Protocol, p.HostPort)
		f, err := os.OpenFile(filepath.Join(r.dir, name), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
		if err != nil {
			return fmt.Errorf("port registry: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
			f.Close()
			return fmt.Errorf("port registry %s: %w", name, err)
		}
		r.held[name] = f
	}
	return nil
}

// Release forgets ports held by this process.
func (r *Registry) Release(ports []protocol.Port) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range ports {
		name := portFile(p.Protocol, p.HostPort)
		if f := r.held[name]; f != nil {
			os.Remove(f.Name())
			f.Close()
			delete(r.held, name)
		}
	}
}

// Published reports whether a live box publishes port (over proto) on
// this host.
func (r *Registry) Published(proto string, port uint16) bool {
	if r == nil {
		return false
	}
	name := portFile(proto, int(port))
	r.mu.Lock()
	_, mine := r.held[name]
	r.mu.Unlock()
	if mine {
		return true
	}
	f, err := os.OpenFile(filepath.Join(r.dir, name), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	// Held by a live shim: an exclusive lock is refused.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
