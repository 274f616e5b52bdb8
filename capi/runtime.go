package main

// #include "capi.h"
import "C"

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/abi/convert"
	"github.com/boxlite/boxlite/internal/backend"
)

// decode reads an optional JSON object strictly: unknown fields are errors.
func decode(what string, s *C.cchar_t, v any) error {
	if s == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(C.GoString((*C.char)(s)))))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s JSON: %v", what, err)
	}
	// One object: whatever follows it would otherwise be dropped unread.
	if _, err := dec.Token(); err != io.EOF {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s JSON: more data after the object", what)
	}
	return nil
}

func outJSON(v any, out **C.char) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return outString(string(b), out)
}

// libraryAssets is where packages install the shim and guest: beside
// libboxlite.so (Python wheel) or in boxlite/ beside it (CMake install).
func libraryAssets() string {
	p := C.bx_self_path()
	if p == nil {
		return ""
	}
	dir := filepath.Dir(C.GoString(p))
	if _, err := os.Stat(filepath.Join(dir, "boxlite", "boxlite-shim")); err == nil {
		return filepath.Join(dir, "boxlite")
	}
	return dir
}

func runtimeOf(p *C.boxlite_runtime_t) (backend.Runtime, error) {
	return lookup[backend.Runtime](uintptr(C.bx_rt_id(p)), "runtime")
}

//export boxlite_runtime_new
func boxlite_runtime_new(optsJSON *C.cchar_t, out **C.boxlite_runtime_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	var o abi.RuntimeOptions
	if err := decode("runtime options", optsJSON, &o); err != nil {
		return status(err, cerr)
	}
	if out == nil {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "runtime_new: out is NULL"), cerr)
	}
	var opts []boxlite.Option
	if o.Home != "" {
		opts = append(opts, boxlite.WithHome(o.Home))
	}
	if o.OutputLimit != 0 {
		opts = append(opts, boxlite.WithOutputLimit(o.OutputLimit))
	}
	if o.MemoryCap != 0 {
		opts = append(opts, boxlite.WithRunningMemoryCapMiB(o.MemoryCap))
	}
	for _, p := range o.WarmPools {
		bo, err := convert.BoxOptions(p.Box)
		if err != nil {
			return status(fmt.Errorf("warm pool: %w", err), cerr)
		}
		opts = append(opts, boxlite.WithWarmPool(p.Boxes, p.Box.Image, bo...))
	}
	if o.PoolMemory != 0 {
		opts = append(opts, boxlite.WithWarmPoolMemoryMiB(o.PoolMemory))
	}
	if len(o.Registries) > 0 {
		opts = append(opts, boxlite.WithImageRegistries(convert.ImageRegistries(o.Registries)...))
	}
	assets := o.Assets
	if assets == "" && os.Getenv("BOXLITE_ASSETS") == "" {
		assets = libraryAssets()
	}
	if assets != "" {
		opts = append(opts, boxlite.WithAssets(assets))
	}
	rt, err := boxlite.NewRuntime(opts...)
	if err != nil {
		return status(err, cerr)
	}
	C.bx_set_rt(out, C.uintptr_t(newHandle(backend.Local(rt))))
	return status(nil, cerr)
}

//export boxlite_runtime_new_rest
func boxlite_runtime_new_rest(optsJSON *C.cchar_t, out **C.boxlite_runtime_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	if optsJSON == nil {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "runtime_new_rest: options are NULL (\"url\" and \"api_key\" are required)"), cerr)
	}
	var o abi.RestOptions
	if err := decode("REST runtime options", optsJSON, &o); err != nil {
		return status(err, cerr)
	}
	if out == nil {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "runtime_new_rest: out is NULL"), cerr)
	}
	rt, err := backend.REST(o)
	if err != nil {
		return status(err, cerr)
	}
	C.bx_set_rt(out, C.uintptr_t(newHandle(rt)))
	return status(nil, cerr)
}

//export boxlite_runtime_free
func boxlite_runtime_free(p *C.boxlite_runtime_t) {
	defer quiet()
	if rt, ok := release[backend.Runtime](uintptr(C.bx_rt_id(p))); ok {
		rt.Close()
	}
}

//export boxlite_image_load
func boxlite_image_load(p *C.boxlite_runtime_t, path *C.cchar_t, out **C.char, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	rt, err := runtimeOf(p)
	if err == nil && path == nil {
		err = errdefs.Errorf(errdefs.ErrInvalidArgument, "image_load: path is NULL")
	}
	if err == nil {
		imgs, lerr := rt.ImageLoad(context.Background(), C.GoString((*C.char)(path)))
		if err = lerr; err == nil {
			err = outJSON(imgs, out)
		}
	}
	return status(err, cerr)
}

//export boxlite_image_list
func boxlite_image_list(p *C.boxlite_runtime_t, out **C.char, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	rt, err := runtimeOf(p)
	if err == nil {
		imgs, lerr := rt.ImageList(context.Background())
		if err = lerr; err == nil {
			err = outJSON(imgs, out)
		}
	}
	return status(err, cerr)
}

//export boxlite_image_pull
func boxlite_image_pull(p *C.boxlite_runtime_t, ref *C.cchar_t, out **C.char, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	rt, err := runtimeOf(p)
	if err == nil && ref == nil {
		err = errdefs.Errorf(errdefs.ErrInvalidArgument, "image_pull: reference is NULL")
	}
	if err == nil {
		img, perr := rt.ImagePull(context.Background(), C.GoString((*C.char)(ref)))
		if err = perr; err == nil {
			err = outJSON(img, out)
		}
	}
	return status(err, cerr)
}

//export boxlite_image_remove
func boxlite_image_remove(p *C.boxlite_runtime_t, ref *C.cchar_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	rt, err := runtimeOf(p)
	if err == nil && ref == nil {
		err = errdefs.Errorf(errdefs.ErrInvalidArgument, "image_remove: reference is NULL")
	}
	if err == nil {
		err = rt.ImageRemove(context.Background(), C.GoString((*C.char)(ref)))
	}
	return status(err, cerr)
}

//export boxlite_box_list
func boxlite_box_list(p *C.boxlite_runtime_t, out **C.char, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	rt, err := runtimeOf(p)
	if err == nil {
		infos, lerr := rt.List(context.Background())
		if err = lerr; err == nil {
			err = outJSON(convert.BoxInfos(infos), out)
		}
	}
	return status(err, cerr)
}
