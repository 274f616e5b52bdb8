package main

// #include "capi.h"
import "C"

import (
	"context"
	"time"

	"github.com/boxlite/boxlite/core"
	"github.com/boxlite/boxlite/errdefs"
)

// copyOptions is boxlite_box_copy_in/out's options_json (BoxLite's
// CopyOptions; absent booleans take their defaults).
type copyOptions struct {
	Overwrite      *bool    `json:"overwrite"`       // default true
	FollowSymlinks bool     `json:"follow_symlinks"` // default false
	IncludeParent  *bool    `json:"include_parent"`  // default true
	Recursive      *bool    `json:"recursive"`       // default true
	MaxBytes       int64    `json:"max_bytes"`       // 0: the default cap; -1: none
	MaxEntries     int64    `json:"max_entries"`
	TimeoutSecs    *float64 `json:"timeout_secs"` // default: none
}

func parseCopyOptions(s *C.cchar_t) (core.CopyOptions, time.Duration, error) {
	var o copyOptions
	if s != nil {
		if err := decode("copy options", s, &o); err != nil {
			return core.CopyOptions{}, 0, err
		}
	}
	if o.MaxBytes < -1 || o.MaxEntries < -1 {
		return core.CopyOptions{}, 0, errdefs.Errorf(errdefs.ErrInvalidArgument, "copy options: max_bytes and max_entries are > 0, 0 (default) or -1 (no cap)")
	}
	var timeout time.Duration
	if o.TimeoutSecs != nil {
		if *o.TimeoutSecs <= 0 {
			return core.CopyOptions{}, 0, errdefs.Errorf(errdefs.ErrInvalidArgument, "copy options: timeout_secs %v is not positive", *o.TimeoutSecs)
		}
		timeout = time.Duration(*o.TimeoutSecs * float64(time.Second))
	}
	no := func(b *bool) bool { return b != nil && !*b }
	return core.CopyOptions{NoOverwrite: no(o.Overwrite), FollowSymlinks: o.FollowSymlinks, ContentsOnly: no(o.IncludeParent),
		NoRecursive: no(o.Recursive), MaxBytes: o.MaxBytes, MaxEntries: o.MaxEntries}, timeout, nil
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
