package main

// #include "capi.h"
import "C"

import (
	"fmt"
	"runtime/debug"
	"unsafe"

	"github.com/boxlite/boxlite/errdefs"
)

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
	code, ok := codes[errdefs.KindOf(err)]
	if !ok { // never BOXLITE_OK for an error (a test checks every kind has a code)
		code = C.BOXLITE_ERR_INTERNAL
	}
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
