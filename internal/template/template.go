// Package template keeps warm-start templates: a box's VM saved right
// after its agent said hello and before anything that is one box's own, so
// that the next boxes of the same shape start from it instead of booting.
//
// A template directory holds the devices' state (hv.VM.Save), the guest's
// memory (sparse) and the box disk as the template's guest left it, plus
// template.json. A box starts from it with its own copy of the disk and the
// memory mapped copy-on-write from a sealed memfd that the shims running
// boxes of the template share (see RAM), so idle boxes share their pages.
package template

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/hv"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/sparse"
)

// format is the layout of a template directory; a change makes every
// template of an older one stale.
const format = 1

// MaxPerImage bounds the templates kept for one image (shapes, or agents
// and kernels that came and went): the least recently used go first.
const MaxPerImage = 4

// Files of a template directory.
const (
	metaFile    = "template.json"
	stateFile   = "state"
	ramFile     = "ram"
	DiskFile    = "disk.ext4"
	ConsoleFile = "console.log" // the template VM's boot
	holderDir   = "holders"
	lockFile    = ".lock"
)

// maxState bounds a state file (about 70 KB with the guest's memory left out).
const maxState = 64 << 20

// Meta is template.json.
type Meta struct {
	Format      int            `json:"format"`
	Key         string         `json:"key"`
	MemoryMiB   int            `json:"memory_mib"`
	Hello       protocol.Hello `json:"hello"`
	StateSHA256 string         `json:"state_sha256"`
	Created     time.Time      `json:"created"`
	BootMs      float64        `json:"boot_ms"` // the template VM's VMM start to hello
}

// Template is one template directory.
type Template struct {
	Dir string
	Meta
}

// Store is the templates of one image, in Dir/<key>.
type Store struct{ Dir string }

// Key names the template of a VM built as vm: it covers everything that
// shapes the guest until its hello (the VMM, kernel, initramfs, memory,
// CPUs, command line, devices, read-only disks) and the host's own build
// (its protocol, and extra: e.g. the shim binary), so a change to any gives
// another template. The writable disk counts by its size only: the box's
// own replaces it.
func Key(vm hv.Config, extra ...string) (string, error) {
	h := sha256.New()
	put := func(k string, v any) { fmt.Fprintf(h, "%s=%v\n", k, v) }
	ident := func(k, path string) error {
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil {
			return fmt.Errorf("template key: %s %s: %w", k, path, err)
		}
		put(k, fmt.Sprintf("%s:%d:%d:%d:%d.%d", path, st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec))
		return nil
	}
	put("format", format)
	put("protocol", protocol.Version)
	qemu := vm.QEMU
	if qemu == "" {
		qemu = hv.DefaultQEMU
	}
	// The binary hv will run (an upgraded QEMU may not load an older state).
	bin, err := exec.LookPath(qemu)
	if err != nil {
		return "", fmt.Errorf("template key: qemu %s: %w", qemu, err)
	}
	if err := ident("qemu", bin); err != nil {
		return "", err
	}
	if err := ident("kernel", vm.Kernel); err != nil {
		return "", err
	}
	if vm.Initrd != "" {
		if err := ident("initrd", vm.Initrd); err != nil {
			return "", err
		}
	}
	put("memory", vm.MemoryMiB)
	put("cpus", vm.CPUs)
	put("accel", vm.Accel)
	put("cmdline", vm.Cmdline)
	put("channel", vm.Channel)
	if vm.NIC != nil {
		put("nic", vm.NIC.MAC)
	}
	if len(vm.FS) > 0 {
		return "", errdefs.Errorf(errdefs.ErrUnsupported, "template: a VM with shared folders needs memory shared with their daemons")
	}
	for i, d := range vm.Disks {
		put("disk"+strconv.Itoa(i), d.Serial+":"+strconv.FormatBool(d.ReadOnly))
		if d.ReadOnly {
			if err := ident("disk", d.Path); err != nil {
				return "", err
			}
		} else if fi, err := os.Stat(d.Path); err != nil {
			return "", err
		} else {
			put("size", fi.Size())
		}
	}
	for _, e := range extra {
		put("extra", e)
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// FileIdentity is a file's path, size and modification time, for Key's
// extra: a rebuilt binary changes it.
func FileIdentity(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return path + ": " + err.Error()
	}
	return fmt.Sprintf("%s:%d:%d", path, fi.Size(), fi.ModTime().UnixNano())
}

// Get returns the template of key, errdefs.ErrNotFound if there is none,
// or another error if its directory is not a whole template (which Remove
// then clears).
func (s Store) Get(key string) (*Template, error) {
	t := &Template{Dir: filepath.Join(s.Dir, key)}
	b, err := os.ReadFile(filepath.Join(t.Dir, metaFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, errdefs.Errorf(errdefs.ErrNotFound, "template %s", key)
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &t.Meta); err != nil {
		return nil, fmt.Errorf("template %s: %s: %v", key, metaFile, err)
	}
	if t.Format != format || t.Key != key {
		return nil, fmt.Errorf("template %s: format %d key %q: stale", key, t.Format, t.Key)
	}
	fi, err := os.Stat(filepath.Join(t.Dir, ramFile))
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", key, err)
	}
	if fi.Size() != int64(t.MemoryMiB)<<20 {
		return nil, fmt.Errorf("template %s: memory is %d bytes, want %d MiB", key, fi.Size(), t.MemoryMiB)
	}
	if _, err := os.Stat(filepath.Join(t.Dir, DiskFile)); err != nil {
		return nil, fmt.Errorf("template %s: %w", key, err)
	}
	now := time.Now()
	os.Chtimes(filepath.Join(t.Dir, metaFile), now, now) // recently used (see prune)
	return t, nil
}

// Remove deletes the template of key.
func (s Store) Remove(key string) error {
	return os.RemoveAll(filepath.Join(s.Dir, key))
}

// Built is what a Create callback made in its directory.
type Built struct {
	Hello  protocol.Hello
	BootMs float64
}

// Create makes the template of key: build boots a VM of that shape and
// saves it into dir with SaveInto. One process builds a key at a time: one
// that finds it being built waits up to wait for that build, and returns
// its template, or errdefs.ErrAlreadyExists if it is not done by then (or
// failed). The oldest templates beyond MaxPerImage are removed.
func (s Store) Create(key string, wait time.Duration, build func(dir string) (Built, error)) (*Template, error) {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(s.Dir, key+lockFile), os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		for deadline := time.Now().Add(wait); time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
			if unix.Flock(int(lock.Fd()), unix.LOCK_SH|unix.LOCK_NB) == nil {
				if t, err := s.Get(key); err == nil {
					return t, nil
				}
				break // the build failed: this box does not try again
			}
		}
		return nil, errdefs.Errorf(errdefs.ErrAlreadyExists, "template %s is being made by another box", key)
	}
	defer os.Remove(lock.Name())
	if t, err := s.Get(key); err == nil {
		return t, nil // made while this one waited
	}
	s.Remove(key)
	// What a builder of this key that died left (the lock is ours now).
	stale, _ := filepath.Glob(filepath.Join(s.Dir, ".new-"+key+"-*"))
	for _, d := range stale {
		os.RemoveAll(d)
	}
	tmp, err := os.MkdirTemp(s.Dir, ".new-"+key+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	b, err := build(tmp)
	if err != nil {
		return nil, err
	}
	sum, err := FileSHA256(filepath.Join(tmp, stateFile), maxState+1)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(filepath.Join(tmp, ramFile))
	if err != nil {
		return nil, err
	}
	m := Meta{Format: format, Key: key, MemoryMiB: int(fi.Size() >> 20), Hello: b.Hello, StateSHA256: sum,
		Created: time.Now().UTC(), BootMs: b.BootMs}
	mb, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, metaFile), mb, 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, filepath.Join(s.Dir, key)); err != nil {
		return nil, err
	}
	s.prune(key)
	return s.Get(key)
}

// prune removes the least recently used templates beyond MaxPerImage,
// never keep.
func (s Store) prune(keep string) {
	ents, _ := os.ReadDir(s.Dir)
	type used struct {
		key string
		at  time.Time
	}
	var all []used
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || e.Name() == keep {
			continue
		}
		fi, err := os.Stat(filepath.Join(s.Dir, e.Name(), metaFile))
		if err != nil {
			continue
		}
		all = append(all, used{e.Name(), fi.ModTime()})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].at.After(all[j].at) })
	for i := MaxPerImage - 1; i < len(all); i++ {
		s.Remove(all[i].key)
	}
}

// SaveInto saves vm (whose RAM is the Shared file ram) into a Create
// directory: the devices' state, then the memory, sparse. vm is paused
// afterwards; the caller kills it.
func SaveInto(dir string, vm *hv.VM, ram *os.File, timeout time.Duration) error {
	state, err := os.OpenFile(filepath.Join(dir, stateFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer state.Close()
	if err := vm.Save(state, timeout); err != nil {
		return err
	}
	fi, err := ram.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(filepath.Join(dir, ramFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := sparse.CopyData(ctx, out, ram, fi.Size()); err != nil {
		return fmt.Errorf("template: save memory: %w", err)
	}
	return nil
}

// State opens the template's device state, checked against its digest.
func (t *Template) State() (*os.File, error) {
	f, err := os.Open(filepath.Join(t.Dir, stateFile))
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, maxState+1))
	if err == nil && (n > maxState || hex.EncodeToString(h.Sum(nil)) != t.StateSHA256) {
		err = fmt.Errorf("template %s: state does not match its digest", t.Key)
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// FileSHA256 is the hex SHA-256 of the file's first limit bytes (limit <= 0:
// all of it).
func FileSHA256(path string, limit int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	var r io.Reader = f
	if limit > 0 {
		r = io.LimitReader(f, limit)
	}
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
