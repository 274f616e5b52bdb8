package boxnet

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
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
