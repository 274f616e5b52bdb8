package hv

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/boxlite/boxlite/errdefs"
)

func TestFSArgs(t *testing.T) {
	f := os.NewFile(0, "x")
	cfg := Config{Kernel: "/k/vmlinuz", MemoryMiB: 384, CPUs: 1, Accel: KVM,
		FS: []FS{{Tag: "boxlite-rw", Conn: f}, {Tag: "boxlite-ro", Conn: f}}}
	args := strings.Join(buildArgs(cfg, 0, 3, -1, -1, -1, nil, 7, 8), " ")
	for _, want := range []string{
		"-M microvm,x-option-roms=off,isa-serial=on,rtc=on,acpi=on,memory-backend=mem",
		"-object memory-backend-memfd,id=mem,share=on,size=384M -m 384",
		"-chardev socket,id=fs0,fd=7 -device vhost-user-fs-device,chardev=fs0,tag=boxlite-rw",
		"-chardev socket,id=fs1,fd=8 -device vhost-user-fs-device,chardev=fs1,tag=boxlite-ro",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("args lack %q:\n%s", want, args)
		}
	}
	// Guest RAM is shared only for a file system device.
	cfg.FS = nil
	if args := strings.Join(buildArgs(cfg, 0, 3, -1, -1, -1, nil), " "); strings.Contains(args, "memory-backend") {
		t.Errorf("shared memory without a file system: %s", args)
	}
}

func TestCheckFS(t *testing.T) {
	f := os.NewFile(0, "x")
	for _, fss := range [][]FS{
		{{Tag: "", Conn: f}},
		{{Tag: "a,b", Conn: f}},
		{{Tag: strings.Repeat("a", MaxFSTagLen+1), Conn: f}},
		{{Tag: "a", Conn: f}, {Tag: "a", Conn: f}},
		{{Tag: "a"}},
	} {
		if err := checkFS(fss); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%+v: %v, want invalid argument", fss, err)
		}
	}
	if err := checkFS([]FS{{Tag: "boxlite-rw", Conn: f}, {Tag: "boxlite-ro", Conn: f}}); err != nil {
		t.Error(err)
	}
}
