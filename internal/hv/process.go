package hv

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/jail"
)

// process is a started QEMU: a plain child, or one confined by package jail.
type process interface {
	pid() int
	kill() error
	wait() error
	layers() jail.Layers
}

// startProcess starts QEMU with files as descriptors 3, 4, ... on the fork
// thread (see onForkThread), confined when cfg.Jail is set. It returns once
// QEMU itself runs: for a jailed QEMU, after the jail stage reached execve.
func startProcess(cfg Config, bin string, args []string, files []*os.File, out io.Writer) (process, error) {
	if cfg.Jail == nil {
		cmd := &exec.Cmd{
			Path: bin, Args: args, Stdout: out, Stderr: out, ExtraFiles: files,
			SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
			WaitDelay:   time.Second,
		}
		var err error
		onForkThread(func() { err = cmd.Start() })
		if err != nil {
			return nil, fmt.Errorf("hv: start %s: %v: %w", bin, err, errdefs.ErrInternal)
		}
		return plain{cmd}, nil
	}
	spec := jail.Spec{
		Path: bin, Args: args, UID: cfg.Jail.UID, GID: cfg.Jail.GID,
		Devices:    []string{"/dev/null", "/dev/zero", "/dev/urandom"},
		ExtraFiles: files, Stdout: out, Stderr: out,
		Cgroup: &jail.CgroupSpec{Name: cfg.Jail.Cgroup, PidsMax: jailPidsMax, CPUWeight: 100,
			MemoryMaxBytes: int64(cfg.MemoryMiB+jailOverheadMiB) << 20},
	}
	if cfg.RAM != nil && !cfg.RAM.Shared {
		// A guest page that is a hole in the template file costs a page
		// of the file too when the guest first touches it (shmem fills
		// holes on a private mapping's faults), charged to this VMM.
		spec.Cgroup.MemoryMaxBytes += int64(cfg.MemoryMiB) << 20
	}
	if cfg.Accel == KVM {
		spec.Devices = append(spec.Devices, devKVM)
	} else {
		spec.Cgroup.MemoryMaxBytes += tbSizeMiB << 20
	}
	// QEMU's own files are under /usr, which the jail always shows; a
	// QEMU elsewhere (Config.QEMU) is bound in too.
	binds := []string{cfg.Kernel, cfg.Initrd}
	if !strings.HasPrefix(bin, "/usr/") {
		binds = append(binds, bin)
	}
	for _, f := range binds {
		if f != "" {
			spec.Binds = append(spec.Binds, jail.Bind{Host: f})
		}
	}
	if cfg.RAM != nil {
		// QEMU opens guest RAM through its own descriptor (see ramArgs).
		spec.Binds = append(spec.Binds, jail.Bind{Host: "/proc/self/fd", Inside: "/proc/self/fd"})
	}
	c, err := jail.Command(cfg.Jail.Helper, spec)
	if err != nil {
		return nil, fmt.Errorf("hv: jail qemu: %w", err)
	}
	onForkThread(func() { err = c.Start() })
	if err == nil {
		if err = c.Ready(); err != nil {
			c.Process().Kill()
			c.Wait()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("hv: jail qemu: %w", err)
	}
	return jailed{c}, nil
}

type plain struct{ cmd *exec.Cmd }

func (p plain) pid() int            { return p.cmd.Process.Pid }
func (p plain) kill() error         { return p.cmd.Process.Kill() }
func (p plain) wait() error         { return p.cmd.Wait() }
func (p plain) layers() jail.Layers { return jail.Layers{} }

type jailed struct{ c *jail.Cmd }

func (j jailed) pid() int            { return j.c.Process().Pid }
func (j jailed) kill() error         { return j.c.Process().Kill() }
func (j jailed) wait() error         { return j.c.Wait() }
func (j jailed) layers() jail.Layers { return j.c.Layers() }

// StartHelper starts a helper of a VM (a vhost-user backend such as
// virtiofsd) confined by package jail, forked from the thread QEMU is forked
// from, so that it too dies with the process that started it (see Start),
// and returns once the helper runs (jail.Cmd.Ready). The caller Waits.
func StartHelper(helper string, spec jail.Spec) (*jail.Cmd, error) {
	c, err := jail.Command(helper, spec)
	if err != nil {
		return nil, err
	}
	onForkThread(func() { err = c.Start() })
	if err != nil {
		return nil, err
	}
	if err = c.Ready(); err != nil {
		c.Process().Kill()
		c.Wait()
		return nil, err
	}
	return c, nil
}
