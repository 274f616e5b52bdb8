package main

// #include "capi.h"
import "C"

import (
	"context"
	"time"
	"unsafe"

	"github.com/boxlite/boxlite/core"
	"github.com/boxlite/boxlite/errdefs"
)

// boxObj is a box handle; id is the C copy of the box id, freed with the handle.
type boxObj struct {
	b  *core.Box
	id *C.char
}

func boxOf(p *C.boxlite_box_t) (*boxObj, error) {
	return lookup[*boxObj](uintptr(C.bx_box_id(p)), "box")
}

func newBoxHandle(b *core.Box, out **C.boxlite_box_t) {
	C.bx_set_box(out, C.uintptr_t(newHandle(&boxObj{b: b, id: C.CString(b.ID())})))
}

type boxOptions struct {
	Image           string            `json:"image"`
	Name            string            `json:"name"`
	MemoryMiB       *int              `json:"memory_mib"`
	CPUs            *int              `json:"cpus"`
	DiskSizeGB      *int              `json:"disk_size_gb"`
	Env             map[string]string `json:"env"`
	WorkingDir      string            `json:"working_dir"`
	User            string            `json:"user"`
	BootTimeoutSecs *float64          `json:"boot_timeout_secs"`
	AutoRemove      bool              `json:"auto_remove"`
	Detach          bool              `json:"detach"`
	Entrypoint      []string          `json:"entrypoint"`
	Cmd             []string          `json:"cmd"`
	Network         *core.NetworkSpec `json:"network"`
	Ports           []core.Port       `json:"ports"`
	Volumes         []core.Volume     `json:"volumes"` // {"host_path", "guest_path", "read_only"}
	Hostname        string            `json:"hostname"`
	Prestart        []string          `json:"prestart"`
}

func (o boxOptions) options() []core.BoxOption {
	var opts []core.BoxOption
	if o.Name != "" {
		opts = append(opts, core.WithName(o.Name))
	}
	if o.MemoryMiB != nil {
		opts = append(opts, core.WithMemoryMiB(*o.MemoryMiB))
	}
	if o.CPUs != nil {
		opts = append(opts, core.WithCPUs(*o.CPUs))
	}
	if o.DiskSizeGB != nil {
		opts = append(opts, core.WithDiskSizeGB(*o.DiskSizeGB))
	}
	for k, v := range o.Env {
		opts = append(opts, core.WithEnv(k, v))
	}
	if o.WorkingDir != "" {
		opts = append(opts, core.WithWorkingDir(o.WorkingDir))
	}
	if o.User != "" {
		opts = append(opts, core.WithUser(o.User))
	}
	if o.Hostname != "" {
		opts = append(opts, core.WithHostname(o.Hostname))
	}
	if len(o.Prestart) > 0 {
		opts = append(opts, core.WithPrestart(o.Prestart...))
	}
	if o.BootTimeoutSecs != nil {
		opts = append(opts, core.WithBootTimeout(time.Duration(*o.BootTimeoutSecs*float64(time.Second))))
	}
	if o.AutoRemove {
		opts = append(opts, core.WithAutoRemove())
	}
	if o.Detach {
		opts = append(opts, core.WithDetach())
	}
	if o.Entrypoint != nil {
		opts = append(opts, core.WithEntrypoint(o.Entrypoint...))
	}
	if o.Cmd != nil {
		opts = append(opts, core.WithCmd(o.Cmd...))
	}
	if o.Network != nil {
		opts = append(opts, core.WithNetwork(*o.Network))
	}
	if len(o.Ports) > 0 {
		opts = append(opts, core.WithPorts(o.Ports...))
	}
	for _, v := range o.Volumes {
		opts = append(opts, core.WithVolume(v.HostPath, v.GuestPath, v.ReadOnly))
	}
	return opts
}

//export boxlite_box_create
func boxlite_box_create(p *C.boxlite_runtime_t, optsJSON *C.cchar_t, out **C.boxlite_box_t, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	rt, err := runtimeOf(p)
	if err != nil {
		return status(err, cerr)
	}
	var o boxOptions
	if optsJSON == nil {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "box_create: options are NULL (\"image\" is required)"), cerr)
	}
	if err := decode("box options", optsJSON, &o); err != nil {
		return status(err, cerr)
	}
	if out == nil {
		return status(errdefs.Errorf(errdefs.ErrInvalidArgument, "box_create: out is NULL"), cerr)
	}
	b, err := rt.Create(context.Background(), o.Image, o.options()...)
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
		err = outJSON(o.b.Info(), out)
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
