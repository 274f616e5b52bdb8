package main

// #include "capi.h"
import "C"

import (
	"context"
	"unsafe"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/abi/convert"
	"github.com/boxlite/boxlite/internal/backend"
)

// boxObj is a box handle; id is the C copy of the box id, freed with the handle.
type boxObj struct {
	b  backend.Box
	id *C.char
}

func boxOf(p *C.boxlite_box_t) (*boxObj, error) {
	return lookup[*boxObj](uintptr(C.bx_box_id(p)), "box")
}

func newBoxHandle(b backend.Box, out **C.boxlite_box_t) {
	C.bx_set_box(out, C.uintptr_t(newHandle(&boxObj{b: b, id: C.CString(b.ID())})))
}

//export boxlite_box_create
func boxlite_box_create(p *C.boxlite_runtime_t, optsJSON *C.cchar_t, out **C.boxlite_box_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	rt, err := runtimeOf(p)
	if err != nil {
		return status(err, cerr)
	}
	var o abi.BoxOptions
	if optsJSON == nil {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "box_create: options are NULL (\"image\" is required)"), cerr)
	}
	if err := decode("box options", optsJSON, &o); err != nil {
		return status(err, cerr)
	}
	if out == nil {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "box_create: out is NULL"), cerr)
	}
	b, err := rt.Create(context.Background(), o)
	if err != nil {
		return status(err, cerr)
	}
	newBoxHandle(b, out)
	return status(nil, cerr)
}

//export boxlite_box_get
func boxlite_box_get(p *C.boxlite_runtime_t, idOrName *C.cchar_t, out **C.boxlite_box_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	rt, err := runtimeOf(p)
	if err != nil {
		return status(err, cerr)
	}
	if idOrName == nil || out == nil {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "box_get: id_or_name or out is NULL"), cerr)
	}
	b, err := rt.Get(context.Background(), C.GoString((*C.char)(idOrName)))
	if err != nil {
		return status(err, cerr)
	}
	newBoxHandle(b, out)
	return status(nil, cerr)
}

//export boxlite_box_id
func boxlite_box_id(p *C.boxlite_box_t) *C.cchar_t {
	defer quiet()
	if o, err := boxOf(p); err == nil {
		return (*C.cchar_t)(o.id)
	}
	return nil
}

//export boxlite_box_info
func boxlite_box_info(p *C.boxlite_box_t, out **C.char, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	o, err := boxOf(p)
	if err == nil {
		err = outJSON(convert.BoxInfo(o.b.Info()), out)
	}
	return status(err, cerr)
}

//export boxlite_box_start
func boxlite_box_start(p *C.boxlite_box_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	o, err := boxOf(p)
	if err == nil {
		err = o.b.Start(context.Background())
	}
	return status(err, cerr)
}

//export boxlite_box_stop
func boxlite_box_stop(p *C.boxlite_box_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	o, err := boxOf(p)
	if err == nil {
		err = o.b.Stop(context.Background())
	}
	return status(err, cerr)
}

//export boxlite_box_pause
func boxlite_box_pause(p *C.boxlite_box_t, out **C.char, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	o, err := boxOf(p)
	if err == nil {
		pi, perr := o.b.Pause(context.Background())
		if err = perr; err == nil && out != nil {
			err = outJSON(pi, out)
		}
	}
	return status(err, cerr)
}

//export boxlite_box_resume
func boxlite_box_resume(p *C.boxlite_box_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	o, err := boxOf(p)
	if err == nil {
		err = o.b.Resume(context.Background())
	}
	return status(err, cerr)
}

//export boxlite_box_remove
func boxlite_box_remove(p *C.boxlite_box_t, force C.int, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	o, err := boxOf(p)
	if err == nil {
		err = o.b.Remove(context.Background(), force != 0)
	}
	return status(err, cerr)
}

//export boxlite_box_free
func boxlite_box_free(p *C.boxlite_box_t) {
	defer quiet()
	if o, ok := release[*boxObj](uintptr(C.bx_box_id(p))); ok {
		C.free(unsafe.Pointer(o.id))
	}
}
