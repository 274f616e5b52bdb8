package main

// #include "capi.h"
import "C"

import (
	"context"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/abi/convert"
)

// copyOptions is boxlite_box_copy_in/out's options_json (BoxLite's
// CopyOptions; absent booleans take their defaults).
func parseCopyOptions(s *C.cchar_t) (boxlite.CopyOptions, time.Duration, error) {
	var o abi.CopyOptions
	if s != nil {
		if err := decode("copy options", s, &o); err != nil {
			return boxlite.CopyOptions{}, 0, err
		}
	}
	return convert.CopyOptions(o)
}

func boxCopy(p *C.boxlite_box_t, src, dst, optsJSON *C.cchar_t, in bool) error {
	o, err := boxOf(p)
	if err != nil {
		return err
	}
	if src == nil || dst == nil {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "copy: a path is NULL")
	}
	opts, timeout, err := parseCopyOptions(optsJSON)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if in {
		return o.b.CopyIn(ctx, C.GoString(src), C.GoString(dst), opts)
	}
	return o.b.CopyOut(ctx, C.GoString(src), C.GoString(dst), opts)
}

//export boxlite_box_copy_in
func boxlite_box_copy_in(p *C.boxlite_box_t, hostSrc, boxDst, optsJSON *C.cchar_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	return status(boxCopy(p, hostSrc, boxDst, optsJSON, true), cerr)
}

//export boxlite_box_copy_out
func boxlite_box_copy_out(p *C.boxlite_box_t, boxSrc, hostDst, optsJSON *C.cchar_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	return status(boxCopy(p, boxSrc, hostDst, optsJSON, false), cerr)
}
