//go:build linux

package agent

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/protocol"
)

// ModulesDir is where the initramfs keeps kernel modules, flat, as NAME.ko.
const ModulesDir = "/lib/modules"

// neededModules are loaded first, in this order; any other .ko in the
// directory follows. Dependencies named in a module's .modinfo are always
// loaded before it (virtio needs virtio_ring in Debian's 6.1 kernels).
var neededModules = []string{"virtio_ring", "virtio", "virtio_mmio", "virtio_blk", "virtio_console", "overlay", "fuse", "virtiofs"}

// volumeModules serve only volumes: a box without any (no boxlite.vol= on
// the command line) does not spend boot time loading them.
var volumeModules = map[string]bool{"fuse": true, "virtiofs": true}

// pageReportingOrder is the smallest free block (2^order pages) the guest
// reports to the host through virtio_balloon. The kernel's default is the
// pageblock order (2 MiB), with which the 16 MiB DMA zone never reports: a
// zone must hold 32 free blocks of the order above its low watermark. Free
// memory in smaller blocks stays resident too. 128 KiB blocks cover both
// and keep the reports few.
const pageReportingOrder = 5

// pageReportingParam is where the kernel takes it; virtio_balloon sets the
// default when it registers, overriding the kernel command line in 6.1, so
// it is written after the module loads (before its first pass, 2 s later).
const pageReportingParam = "/sys/module/page_reporting/parameters/page_reporting_order"

// tunePageReporting lowers the free page reporting order once
// virtio_balloon is loaded; without page reporting it does nothing.
func tunePageReporting(param string) error {
	if _, err := os.Stat(param); os.IsNotExist(err) {
		return nil
	}
	return os.WriteFile(param, []byte(fmt.Sprintln(pageReportingOrder)), 0)
}

// moduleName normalises a module or file name as the kernel does.
func moduleName(s string) string {
	return strings.ReplaceAll(strings.TrimSuffix(s, ".ko"), "-", "_")
}

// splitCmdline splits a kernel command line into words, honouring double quotes.
func splitCmdline(s string) []string {
	var out []string
	var cur strings.Builder
	inQuote, inWord := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote, inWord = !inQuote, true
		case !inQuote && (r == ' ' || r == '\t' || r == '\n'):
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// moduleParams collects "module.param=value" words of the kernel command line
// by module, as modprobe would pass them (the kernel applies them only to
// built-in code).
func moduleParams(cmdline string) map[string]string {
	out := make(map[string]string)
	for _, w := range splitCmdline(cmdline) {
		key, value, hasValue := strings.Cut(w, "=")
		mod, param, ok := strings.Cut(key, ".")
		if !ok || mod == "" || param == "" || strings.ContainsAny(mod, "/") {
			continue
		}
		p := param
		if hasValue {
			if strings.ContainsAny(value, " \t") {
				value = `"` + value + `"`
			}
			p += "=" + value
		}
		m := moduleName(mod)
		if out[m] != "" {
			p = out[m] + " " + p
		}
		out[m] = p
	}
	return out
}

// modinfoDepends returns the module names in the "depends=" entry of a .ko.
func modinfoDepends(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("%s: no .modinfo section", path)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, err
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			var deps []string
			for _, d := range strings.Split(string(v), ",") {
				if d != "" {
					deps = append(deps, moduleName(d))
				}
			}
			return deps, nil
		}
	}
	return nil, nil
}

// loadModules loads every .ko in dir, dependencies first, with the module
// parameters found on the kernel command line. A module already loaded or
// built in is fine. It returns the names it loaded, in order.
func loadModules(dir, cmdline string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	files := make(map[string]string)
	var others []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".ko") {
			name := moduleName(e.Name())
			files[name] = filepath.Join(dir, e.Name())
			others = append(others, name)
		}
	}
	sort.Strings(others)
	params := moduleParams(cmdline)
	volumes := protocol.HasVolumes(cmdline)
	state := make(map[string]int) // 1 loading, 2 done
	var loaded []string
	var load func(name string) error
	load = func(name string) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("module %s: dependency cycle", name)
		case 2:
			return nil
		}
		path, ok := files[name]
		if ok && volumeModules[name] && !volumes {
			state[name] = 2
			return nil
		}
		if !ok {
			state[name] = 2
			if _, err := os.Stat("/sys/module/" + name); err == nil {
				return nil // built in, or loaded already
			}
			return fmt.Errorf("module %s: not in %s and not built into the kernel", name, dir)
		}
		state[name] = 1
		deps, err := modinfoDepends(path)
		if err != nil {
			return fmt.Errorf("module %s: %w", name, err)
		}
		for _, d := range deps {
			if err := load(d); err != nil {
				return fmt.Errorf("module %s needs %w", name, err)
			}
		}
		state[name] = 2
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("module %s: %w", name, err)
		}
		err = unix.FinitModule(fd, params[name], 0)
		unix.Close(fd)
		if err == unix.EEXIST {
			return nil
		}
		if err != nil {
			return fmt.Errorf("load module %s (%s, params %q): %w", name, path, params[name], err)
		}
		loaded = append(loaded, name)
		return nil
	}
	for _, name := range neededModules {
		if _, ok := files[name]; !ok {
			continue // built in, presumably; a missing device says so later
		}
		if err := load(name); err != nil {
			return loaded, err
		}
	}
	for _, name := range others {
		if err := load(name); err != nil {
			return loaded, err
		}
	}
	return loaded, nil
}
