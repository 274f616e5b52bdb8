package main

// #include "capi.h"
import "C"

import (
	"fmt"
	"runtime/debug"
	"unsafe"

	"github.com/boxlite/boxlite/errdefs"
)

// codes is the one mapping from error kinds to C status codes.
var codes = map[errdefs.Kind]C.int{
	errdefs.KindInvalidArgument: C.BOXLITE_ERR_INVALID_ARGUMENT,
	errdefs.KindNotFound:        C.BOXLITE_ERR_NOT_FOUND,
	errdefs.KindAlreadyExists:   C.BOXLITE_ERR_ALREADY_EXISTS,
	errdefs.KindInvalidState:    C.BOXLITE_ERR_INVALID_STATE,
	errdefs.KindTimeout:         C.BOXLITE_ERR_TIMEOUT,
	errdefs.KindUnsupported:     C.BOXLITE_ERR_UNSUPPORTED,
	errdefs.KindBootFailed:      C.BOXLITE_ERR_BOOT_FAILED,
	errdefs.KindClosed:          C.BOXLITE_ERR_CLOSED,
	errdefs.KindLimit:           C.BOXLITE_ERR_LIMIT,
	errdefs.KindInternal:        C.BOXLITE_ERR_INTERNAL,
	errdefs.KindUnreachable:     C.BOXLITE_ERR_UNREACHABLE,
}

// statusNames are static C strings, allocated once.
var statusNames = func() map[C.int]*C.cchar_t {
	cs := func(s string) *C.cchar_t { return (*C.cchar_t)(C.CString(s)) }
	m := map[C.int]*C.cchar_t{C.BOXLITE_OK: cs("ok"), C.BOXLITE_AGAIN: cs("again"), C.BOXLITE_EOF: cs("eof")}
	for k, c := range codes {
		m[c] = cs(string(k))
	}
	m[-1] = cs("unknown")
	return m
}()

// status converts err into a status code and, when cerr is not NULL, an
// error object the caller frees. On success *cerr is set to NULL.
func status(err error, cerr **C.boxlite_error_t) C.int {
	if err == nil {
		if cerr != nil {
			*cerr = nil
		}
		return C.BOXLITE_OK
	}
	code := codes[errdefs.KindOf(err)]
	if cerr != nil {
		e := (*C.boxlite_error_t)(C.malloc(C.size_t(unsafe.Sizeof(C.boxlite_error_t{}))))
		e.code = code
		e.message = C.CString(err.Error())
		*cerr = e
	}
	return code
}

// guard turns a panic in an export into BOXLITE_ERR_INTERNAL; deferred first
// in every export that returns a status.
func guard(rc *C.int, cerr **C.boxlite_error_t) {
	if r := recover(); r != nil {
		*rc = status(fmt.Errorf("boxlite: internal panic: %v\n%s: %w", r, debug.Stack(), errdefs.ErrInternal), cerr)
	}
}

// quiet swallows a panic in an export that returns nothing.
func quiet() { recover() }

//export boxlite_error_free
func boxlite_error_free(e *C.boxlite_error_t) {
	if e == nil {
		return
	}
	C.free(unsafe.Pointer(e.message))
	C.free(unsafe.Pointer(e))
}

//export boxlite_string_free
func boxlite_string_free(s *C.char) { C.free(unsafe.Pointer(s)) }

//export boxlite_status_name
func boxlite_status_name(code C.int) *C.cchar_t {
	if s, ok := statusNames[code]; ok {
		return s
	}
	return statusNames[-1]
}

var version = (*C.cchar_t)(C.CString(C.BOXLITE_VERSION_STRING))

//export boxlite_version
func boxlite_version() *C.cchar_t { return version }

// outString hands a Go string to C as a malloc'd copy.
func outString(s string, out **C.char) error {
	if out == nil {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "output pointer is NULL")
	}
	*out = C.CString(s)
	return nil
}
