package main

/*
#include "capi.h"

uintptr_t bx_sess_id(boxlite_session_t *p);
uintptr_t bx_cell_id(boxlite_cell_t *p);
void bx_set_sess(boxlite_session_t **out, uintptr_t id);
void bx_set_cell(boxlite_cell_t **out, uintptr_t id);
*/
import "C"

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"
	"unsafe"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/abi/convert"
)

// sessionObj is a session handle: a Python session or a shell session.
type sessionObj struct {
	py   *boxlite.Session
	sh   *boxlite.ShellSession
	code *boxlite.CodeContext
}

func (o *sessionObj) kind() string {
	switch {
	case o.py != nil:
		return "python"
	case o.code != nil:
		return "code:" + o.code.Language()
	}
	return "shell"
}

func sessionOf(p *C.boxlite_session_t) (*sessionObj, error) {
	return lookup[*sessionObj](uintptr(C.bx_sess_id(p)), "session")
}

//export boxlite_session_new
func boxlite_session_new(p *C.boxlite_box_t, kind *C.cchar_t, optsJSON *C.cchar_t, out **C.boxlite_session_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	b, err := boxOf(p)
	if err != nil {
		return status(err, cerr)
	}
	if kind == nil || out == nil {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "session_new: kind or out is NULL"), cerr)
	}
	var o abi.SessionOptions
	if err := decode("session options", optsJSON, &o); err != nil {
		return status(err, cerr)
	}
	opts, err := convert.SessionOptions(o)
	if err != nil {
		return status(err, cerr)
	}
	var obj sessionObj
	switch k := C.GoString((*C.char)(kind)); k {
	case "python":
		if o.Shell != "" {
			return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "session options: \"shell\" is for shell sessions"), cerr)
		}
		obj.py, err = b.b.NewPythonSession(context.Background(), opts)
	case "shell":
		if o.Python != "" {
			return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "session options: \"python\" is for python sessions"), cerr)
		}
		obj.sh, err = b.b.NewShellSession(context.Background(), opts)
	default:
		lang, isCode := strings.CutPrefix(k, "code:")
		if !isCode {
			err = errdefs.Errorf(errdefs.ErrInvalidArgument, "session_new: kind %q is not \"python\", \"shell\" or \"code:LANGUAGE\"", k)
			break
		}
		obj.code, err = b.b.NewCodeContext(context.Background(), lang, opts)
	}
	if err != nil {
		return status(err, cerr)
	}
	C.bx_set_sess(out, C.uintptr_t(newHandle(&obj)))
	return status(nil, cerr)
}

func pythonOf(p *C.boxlite_session_t, op string) (*boxlite.Session, error) {
	o, err := sessionOf(p)
	if err != nil {
		return nil, err
	}
	if o.py == nil {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: this is a %s session, not a python one", op, o.kind())
	}
	return o.py, nil
}

// cellResult hands a cell's result to C: the JSON with BOXLITE_OK, or with
// BOXLITE_ERR_TIMEOUT; nothing with other errors.
func cellResult(r boxlite.CellResult, err error, out **C.char, cerr **C.boxlite_error_t) C.int {
	if err != nil && !errors.Is(err, errdefs.ErrTimeout) {
		return status(err, cerr)
	}
	if out == nil {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "result_json is NULL"), cerr)
	}
	if jerr := outJSON(convert.CellResult(r), out); jerr != nil {
		return status(jerr, cerr)
	}
	return status(err, cerr)
}

// cellTimeout reads a cell's options: NULL or {"timeout_secs": N}.
func cellTimeout(optsJSON *C.cchar_t) (time.Duration, error) {
	var o abi.CellOptions
	if optsJSON != nil {
		if err := decode("cell options", optsJSON, &o); err != nil {
			return 0, err
		}
	}
	return o.TimeoutSecs.Duration("cell options: timeout_secs")
}

//export boxlite_session_run
func boxlite_session_run(p *C.boxlite_session_t, code, optsJSON *C.cchar_t, out **C.char, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	if out != nil {
		*out = nil
	}
	s, err := pythonOf(p, "session_run")
	if err != nil {
		return status(err, cerr)
	}
	if code == nil || out == nil {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "session_run: code or result_json is NULL"), cerr)
	}
	timeout, err := cellTimeout(optsJSON)
	if err != nil {
		return status(err, cerr)
	}
	r, err := s.Run(context.Background(), C.GoString((*C.char)(code)), timeout)
	return cellResult(r, err, out, cerr)
}

// cellObj is a cell handle; its waker's eventfd serves event loops (see execObj).
type cellObj struct {
	c *boxlite.Cell
	waker
	want bool // the caller read the cell dry: wake it when that changes
}

func (x *cellObj) notify() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.wakeLocked(x.want)
}

// rearm resets the eventfd after a read found nothing, and sets it again if
// something arrived meanwhile.
func (x *cellObj) rearm() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.want = true
	x.resetLocked(x.c.Pending())
}

func cellOf(p *C.boxlite_cell_t) (*cellObj, error) {
	return lookup[*cellObj](uintptr(C.bx_cell_id(p)), "cell")
}

//export boxlite_session_run_start
func boxlite_session_run_start(p *C.boxlite_session_t, code, optsJSON *C.cchar_t, out **C.boxlite_cell_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	s, err := pythonOf(p, "session_run_start")
	if err != nil {
		return status(err, cerr)
	}
	if code == nil || out == nil {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "session_run_start: code or out is NULL"), cerr)
	}
	timeout, err := cellTimeout(optsJSON)
	if err != nil {
		return status(err, cerr)
	}
	x := &cellObj{want: true}
	if err := x.init(); err != nil {
		return status(err, cerr)
	}
	c, err := s.RunStream(context.Background(), C.GoString((*C.char)(code)), timeout)
	if err != nil {
		x.close()
		return status(err, cerr)
	}
	x.c = c
	c.Notify(x.notify)
	C.bx_set_cell(out, C.uintptr_t(newHandle(x)))
	return status(nil, cerr)
}

//export boxlite_cell_read
func boxlite_cell_read(p *C.boxlite_cell_t, buf *C.uint8_t, capacity C.size_t, timeoutMs C.int64_t, stream *C.int, n *C.size_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	x, err := cellOf(p)
	if err != nil {
		return status(err, cerr)
	}
	if n == nil || stream == nil || buf == nil || capacity == 0 {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "cell_read: buf, cap, stream or n is NULL or 0"), cerr)
	}
	*n, *stream = 0, 0
	dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(capacity))
	status(nil, cerr)
	return x.read(timeoutMs, func() (C.int, bool) {
		fd, got, err := x.c.ReadNonblock(dst)
		switch {
		case got > 0:
			x.mu.Lock()
			x.want = false
			x.mu.Unlock()
			*n, *stream = C.size_t(got), C.int(fd)
			return C.BOXLITE_OK, true
		case err == io.EOF:
			return C.BOXLITE_EOF, true
		case err != nil:
			return status(err, cerr), true
		}
		return 0, false
	}, x.rearm)
}

//export boxlite_cell_fd
func boxlite_cell_fd(p *C.boxlite_cell_t) C.int {
	defer quiet()
	x, err := cellOf(p)
	if err != nil {
		return -1
	}
	return x.fd()
}

//export boxlite_cell_result
func boxlite_cell_result(p *C.boxlite_cell_t, timeoutMs C.int64_t, out **C.char, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	if out != nil {
		*out = nil
	}
	x, err := cellOf(p)
	if err != nil {
		return status(err, cerr)
	}
	if out == nil {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "cell_result: result_json is NULL"), cerr)
	}
	// A poll (timeout 0) leaves the output to boxlite_cell_read; a wait
	// collects what is left, so a cell blocked on unread output can end.
	wait := abi.Millis(timeoutMs)
	if wait.Poll() {
		select {
		case <-x.c.Done():
			wait = -1 // ended: collect without a deadline
		default:
			status(nil, cerr)
			return C.BOXLITE_AGAIN
		}
	}
	ctx, cancel := wait.Context(context.Background())
	defer cancel()
	r, err := x.c.Result(ctx)
	if err != nil && ctx.Err() != nil {
		select {
		case <-x.c.Done():
			r, err = x.c.Result(context.Background())
		default:
			status(nil, cerr)
			return C.BOXLITE_AGAIN
		}
	}
	return cellResult(r, err, out, cerr)
}

//export boxlite_cell_interrupt
func boxlite_cell_interrupt(p *C.boxlite_cell_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	x, err := cellOf(p)
	if err == nil {
		x.c.Interrupt()
	}
	return status(err, cerr)
}

//export boxlite_cell_free
func boxlite_cell_free(p *C.boxlite_cell_t) {
	defer quiet()
	x, ok := release[*cellObj](uintptr(C.bx_cell_id(p)))
	if !ok {
		return
	}
	x.c.Close()
	x.close()
}

//export boxlite_session_exec
func boxlite_session_exec(p *C.boxlite_session_t, cmdJSON *C.cchar_t, out **C.boxlite_result_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	if out != nil {
		*out = nil
	}
	o, err := sessionOf(p)
	if err != nil {
		return status(err, cerr)
	}
	if o.sh == nil {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "session_exec: this is a %s session, not a shell one", o.kind()), cerr)
	}
	if cmdJSON == nil || out == nil {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "session_exec: command or out is NULL (\"argv\" is required)"), cerr)
	}
	var c abi.ShellCommand
	if err := decode("shell command", cmdJSON, &c); err != nil {
		return status(err, cerr)
	}
	timeout, err := convert.ShellCommand(c)
	if err != nil {
		return status(err, cerr)
	}
	res, err := o.sh.ExecLimit(context.Background(), c.Argv, c.Env, timeout, c.OutputLimit)
	if res == nil || (err != nil && !errors.Is(err, errdefs.ErrTimeout)) {
		return status(err, cerr)
	}
	*out = newResult(res)
	return status(err, cerr)
}

//export boxlite_session_run_code
func boxlite_session_run_code(p *C.boxlite_session_t, code, optsJSON *C.cchar_t, out **C.char, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	if out != nil {
		*out = nil
	}
	o, err := sessionOf(p)
	if err != nil {
		return status(err, cerr)
	}
	if o.code == nil {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "session_run_code: this is a %s session, not a code context", o.kind()), cerr)
	}
	if code == nil || out == nil {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "session_run_code: code or execution_json is NULL"), cerr)
	}
	var co abi.CodeOptions
	if optsJSON != nil {
		if err := decode("code options", optsJSON, &co); err != nil {
			return status(err, cerr)
		}
	}
	timeout, err := co.TimeoutSecs.Duration("code options: timeout_secs")
	if err != nil {
		return status(err, cerr)
	}
	ex, err := o.code.RunCode(context.Background(), C.GoString((*C.char)(code)), &boxlite.RunCodeOptions{Timeout: timeout, Env: co.Env})
	if ex == nil || (err != nil && !errors.Is(err, errdefs.ErrTimeout)) {
		return status(err, cerr)
	}
	if jerr := outJSON(convert.CodeExecution(ex, err != nil), out); jerr != nil {
		return status(jerr, cerr)
	}
	return status(err, cerr)
}

//export boxlite_session_interrupt
func boxlite_session_interrupt(p *C.boxlite_session_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	o, err := sessionOf(p)
	if err != nil {
		return status(err, cerr)
	}
	switch {
	case o.py != nil:
		o.py.Interrupt()
	case o.code != nil:
		o.code.Interrupt()
	default:
		o.sh.Interrupt()
	}
	return status(nil, cerr)
}

//export boxlite_session_reset
func boxlite_session_reset(p *C.boxlite_session_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	o, err := sessionOf(p)
	if err != nil {
		return status(err, cerr)
	}
	switch {
	case o.py != nil:
		err = o.py.Reset(context.Background())
	case o.code != nil:
		err = o.code.Restart(context.Background())
	default:
		err = o.sh.Reset(context.Background())
	}
	return status(err, cerr)
}

//export boxlite_session_info
func boxlite_session_info(p *C.boxlite_session_t, out **C.char, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	o, err := sessionOf(p)
	if err != nil {
		return status(err, cerr)
	}
	info := abi.SessionInfo{Kind: o.kind()}
	if o.py != nil {
		info.Pid, info.Restarts, info.Python = o.py.Pid(), o.py.Restarts(), o.py.PythonVersion()
	} else if o.code != nil {
		info.Pid, info.Restarts = o.code.Pid(), o.code.Restarts()
	} else {
		info.Pid, info.Restarts = o.sh.Pid(), o.sh.Restarts()
	}
	return status(outJSON(info, out), cerr)
}

//export boxlite_session_free
func boxlite_session_free(p *C.boxlite_session_t) {
	defer quiet()
	o, ok := release[*sessionObj](uintptr(C.bx_sess_id(p)))
	if !ok {
		return
	}
	switch {
	case o.py != nil:
		o.py.Close()
	case o.code != nil:
		o.code.Close()
	default:
		o.sh.Close()
	}
}
