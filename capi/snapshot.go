package main

// #include "capi.h"
import "C"

import (
	"context"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/abi/convert"
)

// goStringOrEmpty is a C string that may be NULL (meaning "").
func goStringOrEmpty(s *C.cchar_t) string {
	if s == nil {
		return ""
	}
	return C.GoString((*C.char)(s))
}

// snapshotName is a required snapshot name argument.
func snapshotName(op string, s *C.cchar_t) (string, error) {
	if s == nil {
		return "", errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: name is NULL", op)
	}
	return C.GoString((*C.char)(s)), nil
}

//export boxlite_box_snapshot_create
func boxlite_box_snapshot_create(p *C.boxlite_box_t, name *C.cchar_t, out **C.char, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	o, err := boxOf(p)
	if err == nil && out == nil {
		err = errdefs.Errorf(errdefs.ErrInvalidArgument, "snapshot_create: out_json is NULL")
	}
	if err == nil {
		var si boxlite.SnapshotInfo
		if si, err = o.b.CreateSnapshot(context.Background(), goStringOrEmpty(name)); err == nil {
			err = outJSON(si, out)
		}
	}
	return status(err, cerr)
}

//export boxlite_box_snapshot_create_with
func boxlite_box_snapshot_create_with(p *C.boxlite_box_t, name, optsJSON *C.cchar_t, out **C.char, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	o, err := boxOf(p)
	var opts abi.SnapshotOptions
	if err == nil {
		err = decode("snapshot options", optsJSON, &opts)
	}
	if err == nil && out == nil {
		err = errdefs.Errorf(errdefs.ErrInvalidArgument, "snapshot_create_with: out_json is NULL")
	}
	if err == nil {
		var si boxlite.SnapshotInfo
		if si, err = o.b.CreateSnapshotWith(context.Background(), goStringOrEmpty(name), convert.SnapshotOptions(opts)); err == nil {
			err = outJSON(si, out)
		}
	}
	return status(err, cerr)
}

//export boxlite_box_snapshot_list
func boxlite_box_snapshot_list(p *C.boxlite_box_t, out **C.char, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	o, err := boxOf(p)
	if err == nil {
		var all []boxlite.SnapshotInfo
		if all, err = o.b.Snapshots(context.Background()); err == nil {
			err = outJSON(all, out)
		}
	}
	return status(err, cerr)
}

//export boxlite_box_snapshot_get
func boxlite_box_snapshot_get(p *C.boxlite_box_t, name *C.cchar_t, out **C.char, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	o, err := boxOf(p)
	var n string
	if err == nil {
		n, err = snapshotName("snapshot_get", name)
	}
	if err == nil {
		var si boxlite.SnapshotInfo
		if si, err = o.b.Snapshot(context.Background(), n); err == nil {
			err = outJSON(si, out)
		}
	}
	return status(err, cerr)
}

//export boxlite_box_snapshot_remove
func boxlite_box_snapshot_remove(p *C.boxlite_box_t, name *C.cchar_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	o, err := boxOf(p)
	var n string
	if err == nil {
		n, err = snapshotName("snapshot_remove", name)
	}
	if err == nil {
		err = o.b.RemoveSnapshot(context.Background(), n)
	}
	return status(err, cerr)
}

//export boxlite_box_snapshot_restore
func boxlite_box_snapshot_restore(p *C.boxlite_box_t, name *C.cchar_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	o, err := boxOf(p)
	var n string
	if err == nil {
		n, err = snapshotName("snapshot_restore", name)
	}
	if err == nil {
		err = o.b.RestoreSnapshot(context.Background(), n)
	}
	return status(err, cerr)
}

//export boxlite_box_clone
func boxlite_box_clone(p *C.boxlite_box_t, optsJSON *C.cchar_t, out **C.boxlite_box_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	o, err := boxOf(p)
	if err != nil {
		return status(err, cerr)
	}
	var opts abi.CloneOptions
	if err := decode("clone options", optsJSON, &opts); err != nil {
		return status(err, cerr)
	}
	if out == nil {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "box_clone: out is NULL"), cerr)
	}
	c, err := o.b.Clone(context.Background(), boxlite.CloneOptions{Name: opts.Name, Snapshot: opts.Snapshot})
	if err != nil {
		return status(err, cerr)
	}
	newBoxHandle(c, out)
	return status(nil, cerr)
}

//export boxlite_box_fork
func boxlite_box_fork(p *C.boxlite_box_t, optsJSON *C.cchar_t, out **C.char, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	o, err := boxOf(p)
	if err != nil {
		return status(err, cerr)
	}
	opts := struct {
		Count int      `json:"count"`
		Names []string `json:"names"`
	}{Count: 1}
	if err := decode("fork options", optsJSON, &opts); err != nil {
		return status(err, cerr)
	}
	if out == nil {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "box_fork: out_json is NULL"), cerr)
	}
	forks, err := o.b.Fork(context.Background(), opts.Count, opts.Names)
	if err != nil {
		return status(err, cerr)
	}
	ids := make([]string, len(forks))
	for i, f := range forks {
		ids[i] = f.ID()
	}
	return status(outJSON(ids, out), cerr)
}

//export boxlite_box_export
func boxlite_box_export(p *C.boxlite_box_t, dest *C.cchar_t, out **C.char, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	o, err := boxOf(p)
	if err == nil && (dest == nil || out == nil) {
		err = errdefs.Errorf(errdefs.ErrInvalidArgument, "box_export: dest or out_path is NULL")
	}
	if err == nil {
		var path string
		if path, err = o.b.Export(context.Background(), C.GoString((*C.char)(dest))); err == nil {
			err = outString(path, out)
		}
	}
	return status(err, cerr)
}

//export boxlite_runtime_import_box
func boxlite_runtime_import_box(p *C.boxlite_runtime_t, path, name, optsJSON *C.cchar_t, out **C.boxlite_box_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	rt, err := runtimeOf(p)
	if err != nil {
		return status(err, cerr)
	}
	if path == nil || out == nil {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "runtime_import_box: archive_path or out is NULL"), cerr)
	}
	var o abi.BoxOptions
	if err := decode("import options", optsJSON, &o); err != nil {
		return status(err, cerr)
	}
	opts, err := convert.ImportOptions(o)
	if err != nil {
		return status(err, cerr)
	}
	b, err := rt.ImportBox(context.Background(), C.GoString((*C.char)(path)), goStringOrEmpty(name), opts)
	if err != nil {
		return status(err, cerr)
	}
	newBoxHandle(b, out)
	return status(nil, cerr)
}
