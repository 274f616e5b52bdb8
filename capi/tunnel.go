package main

/*
#include "capi.h"

// Handle casts for forwarders (see cgo.go).
static uintptr_t bx_fwd_id(boxlite_forwarder_t *p) { return (uintptr_t)p; }
static void bx_set_fwd(boxlite_forwarder_t **out, uintptr_t id) { *out = (boxlite_forwarder_t *)id; }
*/
import "C"

import (
	"context"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/abi/convert"
	"github.com/boxlite/boxlite/internal/backend"
)

// connectTimeout bounds boxlite_box_tunnel_connect: starting a stopped box
// and the agent's connect.
const connectTimeout = 10 * time.Minute

//export boxlite_box_tunnel_connect
func boxlite_box_tunnel_connect(p *C.boxlite_box_t, port C.int, fdOut *C.int, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	o, err := boxOf(p)
	if err != nil {
		return status(err, cerr)
	}
	if fdOut == nil {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "box_tunnel_connect: fd_out is NULL"), cerr)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return status(errdefs.Errorf(errdefs.ErrInternal, "box_tunnel_connect: socketpair: %v", err), cerr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	t, err := o.b.DialTunnel(ctx, int(port))
	if err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return status(err, cerr)
	}
	unix.SetNonblock(fds[1], true) // through Go's poller: closing it wakes a blocked read
	go splice(t, os.NewFile(uintptr(fds[1]), "tunnel"))
	*fdOut = C.int(fds[0])
	return status(nil, cerr)
}

// splice carries bytes between a tunnel and the library's end of the
// caller's socket pair, passing each side's half-close on. Each copy moves
// one buffer at a time: the socket's buffer and the tunnel's windows bound
// what is in flight.
func splice(t backend.TunnelConn, f *os.File) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the caller's bytes to the box
		defer wg.Done()
		if _, err := io.Copy(t, f); err == nil {
			t.CloseWrite()
		} else {
			t.Close()
		}
	}()
	_, err := io.Copy(f, t) // the box's bytes to the caller
	how := unix.SHUT_WR
	if err != nil {
		t.Close()
		how = unix.SHUT_RDWR // the caller reads EOF, its writes fail
	}
	if rc, err := f.SyscallConn(); err == nil { // not f.Fd(): it would make the file blocking
		rc.Control(func(fd uintptr) { unix.Shutdown(int(fd), how) })
	}
	wg.Wait()
	t.Close()
	f.Close()
}

// fwdObj is a forwarder handle.
type fwdObj struct{ f backend.Forwarder }

func fwdOf(p *C.boxlite_forwarder_t) (*fwdObj, error) {
	return lookup[*fwdObj](uintptr(C.bx_fwd_id(p)), "forwarder")
}

//export boxlite_box_tunnel_forward
func boxlite_box_tunnel_forward(p *C.boxlite_box_t, port C.int, listenJSON *C.cchar_t, out **C.boxlite_forwarder_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	o, err := boxOf(p)
	if err != nil {
		return status(err, cerr)
	}
	if listenJSON == nil || out == nil {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "box_tunnel_forward: listen_json or out is NULL"), cerr)
	}
	var a abi.SocketAddress
	if err := decode("socket address", listenJSON, &a); err != nil {
		return status(err, cerr)
	}
	listen, err := convert.SocketAddress(a)
	if err != nil {
		return status(err, cerr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	f, err := o.b.ForwardTunnel(ctx, int(port), listen)
	if err != nil {
		return status(err, cerr)
	}
	C.bx_set_fwd(out, C.uintptr_t(newHandle(&fwdObj{f: f})))
	return status(nil, cerr)
}

//export boxlite_forwarder_local_addr
func boxlite_forwarder_local_addr(p *C.boxlite_forwarder_t, out **C.char, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	x, err := fwdOf(p)
	if err == nil {
		if out == nil {
			err = errdefs.Errorf(errdefs.ErrInvalidArgument, "forwarder_local_addr: out_json is NULL")
		} else {
			err = outJSON(convert.SocketAddressOf(x.f.LocalAddr()), out)
		}
	}
	return status(err, cerr)
}

//export boxlite_forwarder_wait
func boxlite_forwarder_wait(p *C.boxlite_forwarder_t, timeoutMs C.int64_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	x, err := fwdOf(p)
	if err != nil {
		return status(err, cerr)
	}
	if !doneWithin(x.f.Done(), timeoutMs) {
		status(nil, cerr)
		return C.BOXLITE_AGAIN
	}
	return status(x.f.Wait(context.Background()), cerr)
}

//export boxlite_forwarder_close
func boxlite_forwarder_close(p *C.boxlite_forwarder_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	x, err := fwdOf(p)
	if err == nil {
		err = x.f.Close()
	}
	return status(err, cerr)
}

//export boxlite_forwarder_free
func boxlite_forwarder_free(p *C.boxlite_forwarder_t) {
	defer quiet()
	if x, ok := release[*fwdObj](uintptr(C.bx_fwd_id(p))); ok {
		x.f.Close()
	}
}

func updateNetwork(p *C.boxlite_box_t, specJSON *C.cchar_t, outbound bool) error {
	o, err := boxOf(p)
	if err != nil {
		return err
	}
	if specJSON == nil {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "box_update_network: spec_json is NULL (\"mode\" is required)")
	}
	var d abi.NetworkDirection
	if err := decode("network direction", specJSON, &d); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if outbound {
		return o.b.UpdateOutbound(ctx, d.Mode, d.AllowNet)
	}
	return o.b.UpdateInbound(ctx, d.Mode, d.AllowNet)
}

//export boxlite_box_update_outbound
func boxlite_box_update_outbound(p *C.boxlite_box_t, specJSON *C.cchar_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	return status(updateNetwork(p, specJSON, true), cerr)
}

//export boxlite_box_update_inbound
func boxlite_box_update_inbound(p *C.boxlite_box_t, specJSON *C.cchar_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	return status(updateNetwork(p, specJSON, false), cerr)
}
