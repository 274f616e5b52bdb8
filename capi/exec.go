package main

// #include "capi.h"
import "C"

import (
	"context"
	"errors"
	"runtime/debug"
	"syscall"
	"unsafe"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/abi/convert"
	"github.com/boxlite/boxlite/internal/backend"
)

func parseCommand(s *C.cchar_t) (boxlite.Command, error) {
	var c abi.Command
	if s == nil {
		return boxlite.Command{}, errdefs.Errorf(errdefs.ErrInvalidArgument, "command is NULL (\"argv\" is required)")
	}
	if err := decode("command", s, &c); err != nil {
		return boxlite.Command{}, err
	}
	return convert.Command(c)
}

// execObj is an execution handle; its waker's eventfd serves event loops.
type execObj struct {
	e  backend.Execution
	id *C.char // e.ID(), for the handle's life
	waker
	eof [3]bool // the streams whose end the caller has been told
	// want marks the streams the caller read dry (its last read was AGAIN):
	// only those keep the fd readable, so a stream the caller paused
	// (stopped reading while data was left) cannot make its poll loop spin.
	want [3]bool
}

// notify runs on library goroutines when output or the exit arrives.
func (x *execObj) notify() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.wakeLocked(true)
}

// rearm records that the caller read stream dry and resets the eventfd,
// setting it again if a stream the caller read dry has something after all,
// so that a read finding one stream empty never swallows the other's wakeup.
func (x *execObj) rearm(stream int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.want[stream] = true
	again := false
	for _, fd := range []int{1, 2} {
		again = again || (x.want[fd] && !x.eof[fd] && x.e.Pending(fd))
	}
	x.resetLocked(again)
}

// got records what a read of fd returned: data, or the end.
func (x *execObj) got(fd int, eof bool) {
	x.mu.Lock()
	x.want[fd] = false
	x.eof[fd] = x.eof[fd] || eof
	x.mu.Unlock()
}

func execOf(p *C.boxlite_execution_t) (*execObj, error) {
	return lookup[*execObj](uintptr(C.bx_ex_id(p)), "execution")
}

// boxCommand reads the box handle and the command of an exec or a run.
func boxCommand(p *C.boxlite_box_t, cmdJSON *C.cchar_t, outNil bool, op string) (*boxObj, boxlite.Command, error) {
	o, err := boxOf(p)
	if err != nil {
		return nil, boxlite.Command{}, err
	}
	cmd, err := parseCommand(cmdJSON)
	if err != nil {
		return nil, boxlite.Command{}, err
	}
	if outNil {
		return nil, boxlite.Command{}, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: out is NULL", op)
	}
	return o, cmd, nil
}

//export boxlite_box_exec
func boxlite_box_exec(p *C.boxlite_box_t, cmdJSON *C.cchar_t, out **C.boxlite_execution_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	o, cmd, err := boxCommand(p, cmdJSON, out == nil, "box_exec")
	if err != nil {
		return status(err, cerr)
	}
	x := &execObj{}
	if err := x.init(); err != nil {
		return status(err, cerr)
	}
	e, err := o.b.Exec(context.Background(), cmd)
	if err != nil {
		x.close()
		return status(err, cerr)
	}
	x.e, x.id = e, C.CString(e.ID())
	e.Notify(x.notify)
	C.bx_set_ex(out, C.uintptr_t(newHandle(x)))
	return status(nil, cerr)
}

//export boxlite_box_run
func boxlite_box_run(p *C.boxlite_box_t, cmdJSON *C.cchar_t, out **C.boxlite_result_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	o, cmd, err := boxCommand(p, cmdJSON, out == nil, "box_run")
	if err != nil {
		return status(err, cerr)
	}
	res, err := o.b.Run(context.Background(), cmd)
	if err != nil && !(res != nil && res.TimedOut) {
		return status(err, cerr)
	}
	*out = newResult(res)
	return status(nil, cerr)
}

// newResult copies a collected result to C memory (boxlite_result_free).
func newResult(res *boxlite.ExecResult) *C.boxlite_result_t {
	r := (*C.boxlite_result_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.boxlite_result_t{}))))
	setExit(&r.exit, res.ExitStatus)
	r.stdout_data, r.stdout_len = cBytes(res.Stdout)
	r.stderr_data, r.stderr_len = cBytes(res.Stderr)
	r.stdout_truncated, r.stderr_truncated = cBool(res.StdoutTruncated), cBool(res.StderrTruncated)
	if len(res.Stdout)+len(res.Stderr) > bigResult {
		// The caller copies the result again (a Python bytes, a JS Buffer):
		// give Go's copies back first, so that the host's peak stays near
		// two copies of the output rather than four.
		res.Stdout, res.Stderr = nil, nil
		debug.FreeOSMemory()
	}
	return r
}

// bigResult is the size past which newResult returns Go's memory at once.
const bigResult = 8 << 20

func cBool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

func cBytes(b []byte) (*C.uint8_t, C.size_t) {
	p := (*C.uint8_t)(C.malloc(C.size_t(len(b) + 1))) // +1: never malloc(0), and NUL-terminated for convenience
	dst := unsafe.Slice((*byte)(unsafe.Pointer(p)), len(b)+1)
	copy(dst, b)
	dst[len(b)] = 0
	return p, C.size_t(len(b))
}

func setExit(out *C.boxlite_exit_t, st boxlite.ExitStatus) {
	out.exit_code = C.int(st.Code)
	out.signal = C.int(st.Signal)
	out.timed_out = 0
	if st.TimedOut {
		out.timed_out = 1
	}
}

//export boxlite_result_free
func boxlite_result_free(r *C.boxlite_result_t) {
	if r == nil {
		return
	}
	C.free(unsafe.Pointer(r.stdout_data))
	C.free(unsafe.Pointer(r.stderr_data))
	C.free(unsafe.Pointer(r))
}

//export boxlite_execution_read
func boxlite_execution_read(p *C.boxlite_execution_t, stream C.int, buf *C.uint8_t, capacity C.size_t, timeoutMs C.int64_t, n *C.size_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	x, err := execOf(p)
	if err != nil {
		return status(err, cerr)
	}
	if n == nil || (buf == nil && capacity > 0) {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "execution_read: buf or n is NULL"), cerr)
	}
	*n = 0
	dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(capacity))
	fd := int(stream)
	status(nil, cerr)
	return x.read(timeoutMs, func() (C.int, bool) {
		got, err := x.e.ReadNonblock(fd, dst)
		switch {
		case got > 0:
			x.got(fd, false)
			*n = C.size_t(got)
			return C.BOXLITE_OK, true
		case errdefs.KindOf(err) == errdefs.KindInvalidArgument:
			return status(err, cerr), true
		case err != nil:
			x.got(fd, true)
			return C.BOXLITE_EOF, true // how the process ended is wait's to tell
		}
		return 0, false
	}, func() { x.rearm(fd) })
}

//export boxlite_execution_fd
func boxlite_execution_fd(p *C.boxlite_execution_t) C.int {
	defer quiet()
	x, err := execOf(p)
	if err != nil {
		return -1
	}
	return x.fd()
}

//export boxlite_execution_write
func boxlite_execution_write(p *C.boxlite_execution_t, buf *C.cuint8_t, length C.size_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	x, err := execOf(p)
	if err != nil {
		return status(err, cerr)
	}
	if x.e.Stdin() == nil {
		return status(errdefs.Errorf(errdefs.ErrInvalidState, "execution_write: stdin was not requested (\"stdin\": true)"), cerr)
	}
	if buf == nil && length > 0 {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "execution_write: buf is NULL"), cerr)
	}
	// Frames copy what they send, so the caller's buffer is read in place.
	_, err = x.e.Stdin().Write(unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(length)))
	return status(err, cerr)
}

//export boxlite_execution_close_stdin
func boxlite_execution_close_stdin(p *C.boxlite_execution_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	x, err := execOf(p)
	if err == nil {
		if x.e.Stdin() == nil {
			err = errdefs.Errorf(errdefs.ErrInvalidState, "execution_close_stdin: stdin was not requested (\"stdin\": true)")
		} else {
			err = x.e.Stdin().Close()
		}
	}
	return status(err, cerr)
}

// doneWithin waits for done as a C call's timeoutMs says (abi.Millis: 0
// polls, negative waits for ever); false: not yet, the call's BOXLITE_AGAIN.
func doneWithin(done <-chan struct{}, timeoutMs C.int64_t) bool {
	select {
	case <-done:
		return true
	default:
	}
	wait := abi.Millis(timeoutMs)
	if wait.Poll() {
		return false
	}
	ctx, cancel := wait.Context(context.Background())
	defer cancel()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

//export boxlite_execution_wait
func boxlite_execution_wait(p *C.boxlite_execution_t, timeoutMs C.int64_t, out *C.boxlite_exit_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	x, err := execOf(p)
	if err != nil {
		return status(err, cerr)
	}
	if !doneWithin(x.e.Done(), timeoutMs) {
		status(nil, cerr)
		return C.BOXLITE_AGAIN
	}
	st, err := x.e.Wait(context.Background())
	if out != nil {
		setExit(out, st)
	}
	if st.TimedOut && errors.Is(err, errdefs.ErrTimeout) {
		err = nil // the command's own timeout is a result, reported in out
	}
	return status(err, cerr)
}

//export boxlite_execution_signal
func boxlite_execution_signal(p *C.boxlite_execution_t, sig C.int, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	x, err := execOf(p)
	if err == nil {
		if sig < 1 || sig > 64 {
			err = errdefs.Errorf(errdefs.ErrInvalidArgument, "execution_signal: signal %d is outside 1..64", sig)
		} else {
			err = x.e.Signal(syscall.Signal(sig))
		}
	}
	return status(err, cerr)
}

//export boxlite_execution_kill
func boxlite_execution_kill(p *C.boxlite_execution_t, cerr **C.boxlite_error_t) (rc C.int) {
	return boxlite_execution_signal(p, C.int(syscall.SIGKILL), cerr)
}

//export boxlite_execution_resize
func boxlite_execution_resize(p *C.boxlite_execution_t, rows, cols C.int, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	x, err := execOf(p)
	if err == nil {
		err = x.e.Resize(int(rows), int(cols))
	}
	return status(err, cerr)
}

//export boxlite_execution_free
func boxlite_execution_free(p *C.boxlite_execution_t) {
	defer quiet()
	x, ok := release[*execObj](uintptr(C.bx_ex_id(p)))
	if !ok {
		return
	}
	x.e.Close()
	x.close()
	C.free(unsafe.Pointer(x.id))
}

//export boxlite_execution_id
func boxlite_execution_id(p *C.boxlite_execution_t) *C.cchar_t {
	defer quiet()
	if x, err := execOf(p); err == nil {
		return (*C.cchar_t)(x.id)
	}
	return nil
}
