package hv

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/shimapi"
)

const snapMiB = 128

// ask sends a line to a "count" guest and returns its answer.
func ask(t *testing.T, c net.Conn, r *bufio.Reader, line string) string {
	t.Helper()
	c.SetDeadline(time.Now().Add(bootDeadline))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatal(err)
	}
	got, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("answer to %q: %v", line, err)
	}
	return strings.TrimSpace(got)
}

// copyRAM copies a shared RAM file into a new sealed memfd, as a template
// keeps it.
func copyRAM(t *testing.T, src *os.File) *os.File {
	t.Helper()
	dst, err := NewRAM("template", snapMiB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, io.NewSectionReader(src, 0, snapMiB<<20)); err != nil {
		t.Fatal(err)
	}
	if err := Seal(dst); err != nil {
		t.Fatal(err)
	}
	if !Sealed(dst) {
		t.Fatal("Sealed = false after Seal")
	}
	if _, err := dst.WriteAt([]byte("x"), 0); err == nil {
		t.Fatal("a sealed memfd took a write")
	}
	return dst
}

// TestSaveRestore saves a running guest (its RAM a shared memfd) and starts
// two VMs from the saved state, each mapping one sealed copy of the memory
// copy-on-write: each goes on from where the saved one was, on its own.
func TestSaveRestore(t *testing.T) {
	t.Parallel()
	g := guest(t)
	dir := t.TempDir()
	ram, err := NewRAM("guest", snapMiB)
	if err != nil {
		t.Fatal(err)
	}
	defer ram.Close()
	src := &box{console: filepath.Join(dir, "console.log"), rw: filepath.Join(dir, "rw.img")}
	if err := os.WriteFile(src.rw, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := src.config(g, "count")
	cfg.MemoryMiB = snapMiB
	cfg.RAM = &RAM{File: ram, Shared: true}
	src.startCounting(t, cfg)

	state, err := os.Create(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := src.vm.Save(state, time.Minute); err != nil {
		t.Fatalf("Save: %v", err)
	}
	saved := time.Since(t0)
	tmpl := copyRAM(t, ram)
	defer tmpl.Close()
	fi, _ := state.Stat()
	src.vm.Kill()
	t.Logf("save %v, state %d bytes", saved.Round(time.Millisecond), fi.Size())

	var vms []*VM
	for i := 0; i < 2; i++ {
		b := &box{console: filepath.Join(dir, fmt.Sprintf("console%d.log", i)), rw: filepath.Join(dir, fmt.Sprintf("rw%d.img", i))}
		if err := os.WriteFile(b.rw, make([]byte, 1<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		in, err := os.Open(state.Name())
		if err != nil {
			t.Fatal(err)
		}
		cfg := b.config(g, "count")
		cfg.MemoryMiB = snapMiB
		cfg.RAM = &RAM{File: tmpl}
		cfg.Incoming = in
		t0 := time.Now()
		b.vm, err = Start(cfg)
		in.Close()
		if err != nil {
			t.Fatalf("restore %d: %v\n%s", i, err, shimapi.ConsoleTail(b.console, 2048))
		}
		t.Cleanup(func() { b.vm.Kill() })
		c := b.accept(t)
		r := bufio.NewReader(c)
		line := fmt.Sprintf("restored%d", i)
		if got := ask(t, c, r, line); got != "N=2 "+line {
			t.Fatalf("restored VM %d: got %q, want N=2 %s", i, got, line)
		}
		vms = append(vms, b.vm)
		t.Logf("restore %d: Start to first answer %v", i, time.Since(t0).Round(time.Millisecond))
		if got := ask(t, c, r, "again"); got != "N=3 again" {
			t.Fatalf("restored VM %d: got %q", i, got)
		}
	}
	for i, vm := range vms {
		if err := vm.Kill(); err != nil {
			t.Errorf("kill restored VM %d: %v", i, err)
		}
	}
}

func TestRAMConfig(t *testing.T) {
	g := guest(t)
	small, err := NewRAM("small", 64)
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	state, _ := os.Open(os.DevNull)
	defer state.Close()
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"size", Config{MemoryMiB: 128, RAM: &RAM{File: small}}, "the guest has"},
		{"incoming without RAM", Config{Incoming: state}, "needs Config.RAM"},
		{"no file", Config{RAM: &RAM{}}, "Config.RAM.File: required"},
		{"fs private", Config{MemoryMiB: 64, RAM: &RAM{File: small}, FS: []FS{{Tag: "x", Conn: state}}}, "virtio-fs needs shared"},
	} {
		c.cfg.Kernel, c.cfg.Initrd, c.cfg.Accel = g.kernel, g.initrd, TCG
		_, err := Start(c.cfg)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(fmt.Sprint(err), c.want) {
			t.Errorf("%s: Start = %v, want invalid argument with %q", c.name, err, c.want)
		}
	}
}

// TestSaveWithRAMRestore pauses a guest as Box.Pause does (stop, the whole
// VM with its memory into one file) and starts it again from the file,
// where it goes on; a CheckIncoming that refuses the QEMU version fails
// Start before the state is loaded.
func TestSaveWithRAMRestore(t *testing.T) {
	t.Parallel()
	g := guest(t)
	dir := t.TempDir()
	for _, anon := range []bool{false, true} {
		src := &box{console: filepath.Join(dir, "console.log"), rw: filepath.Join(dir, "rw.img")}
		if err := os.WriteFile(src.rw, make([]byte, 1<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := src.config(g, "count")
		cfg.MemoryMiB, cfg.AnonRAMBackend = snapMiB, anon
		src.startCounting(t, cfg)
		version, err := src.vm.Version()
		if err != nil || version == "" {
			t.Fatalf("Version = %q, %v", version, err)
		}
		state, err := os.Create(filepath.Join(dir, "state"))
		if err != nil {
			t.Fatal(err)
		}
		if err := src.vm.Stop(); err != nil {
			t.Fatal(err)
		}
		if err := src.vm.SaveWithRAM(state, time.Minute); err != nil {
			t.Fatalf("SaveWithRAM: %v", err)
		}
		fi, _ := state.Stat()
		state.Close()
		src.vm.Kill()
		if fi.Size() == 0 || fi.Size() > snapMiB<<20 {
			t.Fatalf("state of %d bytes for a guest of %d MiB", fi.Size(), snapMiB)
		}

		refused := errors.New("refused")
		for _, check := range []func(string) error{
			func(v string) error { return refused },
			func(v string) error {
				if v != version {
					return fmt.Errorf("version %q, saved by %q", v, version)
				}
				return nil
			},
		} {
			in, err := os.Open(state.Name())
			if err != nil {
				t.Fatal(err)
			}
			cfg := src.config(g, "count")
			cfg.MemoryMiB, cfg.AnonRAMBackend = snapMiB, anon
			cfg.Incoming, cfg.IncomingWithRAM, cfg.CheckIncoming = in, true, check
			vm, err := Start(cfg)
			in.Close()
			if errors.Is(check("x"), refused) {
				if !errors.Is(err, refused) {
					t.Fatalf("Start with a refusing check: %v", err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("restore (anon backend %v): %v\n%s", anon, err, shimapi.ConsoleTail(src.console, 2048))
			}
			t.Cleanup(func() { vm.Kill() })
			src.vm = vm
			c := src.accept(t)
			r := bufio.NewReader(c)
			if got := ask(t, c, r, "resumed"); got != "N=2 resumed" {
				t.Fatalf("resumed VM (anon backend %v): got %q", anon, got)
			}
			vm.Kill()
		}
	}
}

// startCounting starts the box's VM on cfg (a counting guest), waits for
// it to be ready and checks its first count.
func (b *box) startCounting(t *testing.T, cfg Config) (*net.UnixConn, *bufio.Reader) {
	t.Helper()
	var err error
	b.start = time.Now()
	if b.vm, err = Start(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.vm.Kill() })
	c := b.accept(t)
	r := bufio.NewReader(c)
	b.ready(t, c, r)
	if got := ask(t, c, r, "a"); got != "N=1 a" {
		t.Fatalf("got %q", got)
	}
	return c, r
}
