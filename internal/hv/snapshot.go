package hv

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
)

// RAM is guest memory in a file the caller holds (a memfd), which lets a VM
// be saved and restored without copying its memory through QEMU:
//
//   - Shared: QEMU maps the file MAP_SHARED, so the file always holds the
//     guest's memory; Save then writes only the devices' state (QEMU's
//     x-ignore-shared), and the caller copies the file while the VM is paused.
//   - not Shared: QEMU maps the file MAP_PRIVATE, copy-on-write: the guest
//     starts from the file's contents, its writes stay its own, and every VM
//     mapping the same file shares the pages neither has written. The file
//     should be a sealed memfd (F_SEAL_WRITE...): QEMU opens it read-write
//     (QEMU 7.2 has no other way), and only the seals keep a compromised
//     QEMU from writing into what other VMs map.
//
// The file's size must be Config.MemoryMiB.
type RAM struct {
	File   *os.File
	Shared bool
}

// qmpTimeout bounds one QMP command's answer.
const qmpTimeout = 10 * time.Second

// ramArgs is guest RAM's memory backend, if it needs one: the caller's file
// (QEMU opens it through /proc/self/fd: memory-backend-file takes a path,
// not a descriptor), or a memfd QEMU shares with vhost-user backends.
func ramArgs(cfg Config) []string {
	switch {
	case cfg.RAM != nil:
		share := "off"
		if cfg.RAM.Shared {
			share = "on"
		}
		return []string{"-object", "memory-backend-file,id=mem,size=" + strconv.Itoa(cfg.MemoryMiB) + "M,share=" + share +
			",mem-path=/proc/self/fd/" + strconv.Itoa(cfg.ramFD)}
	case len(cfg.FS) > 0:
		return sharedMemoryArgs(cfg.MemoryMiB)
	case cfg.AnonRAMBackend:
		return []string{"-object", "memory-backend-ram,id=mem,size=" + strconv.Itoa(cfg.MemoryMiB) + "M"}
	}
	return nil
}

func checkRAM(cfg Config) error {
	if cfg.Incoming != nil && cfg.RAM == nil && !cfg.IncomingWithRAM {
		return fmt.Errorf("hv: Config.Incoming: needs Config.RAM (the saved guest memory): %w", errdefs.ErrInvalidArgument)
	}
	if cfg.RAM == nil {
		return nil
	}
	if cfg.IncomingWithRAM && !cfg.RAM.Shared {
		return fmt.Errorf("hv: Config.RAM: a state with its memory loads into shared RAM, not a private mapping: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.RAM.File == nil {
		return fmt.Errorf("hv: Config.RAM.File: required: %w", errdefs.ErrInvalidArgument)
	}
	if len(cfg.FS) > 0 && !cfg.RAM.Shared {
		return fmt.Errorf("hv: Config.RAM: virtio-fs needs shared guest memory, not a private mapping: %w", errdefs.ErrInvalidArgument)
	}
	fi, err := cfg.RAM.File.Stat()
	if err != nil {
		return fmt.Errorf("hv: Config.RAM.File: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	if want := int64(cfg.MemoryMiB) << 20; fi.Size() != want {
		return fmt.Errorf("hv: Config.RAM.File is %d bytes, the guest has %d: %w", fi.Size(), want, errdefs.ErrInvalidArgument)
	}
	return nil
}

// qmpReply is one command's answer, handed from readEvents to command.
type qmpReply struct {
	ret json.RawMessage
	err error
}

// command runs one QMP command and returns its "return" value; fd, when
// set, goes along as SCM_RIGHTS (for getfd). Commands run one at a time.
func (vm *VM) command(name string, args any, fd *os.File) (json.RawMessage, error) {
	vm.cmdMu.Lock()
	defer vm.cmdMu.Unlock()
	// The id ties the answer to this command: one that timed out may
	// still be answered, during the next one.
	vm.cmdSeq++
	id := "boxlite-" + strconv.FormatUint(vm.cmdSeq, 10)
	msg := map[string]any{"execute": name, "id": id}
	if args != nil {
		msg["arguments"] = args
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	reply := make(chan qmpReply, 1)
	vm.mu.Lock()
	vm.pending, vm.pendingID = reply, id
	vm.mu.Unlock()
	defer func() {
		vm.mu.Lock()
		vm.pending = nil
		vm.mu.Unlock()
	}()
	var oob []byte
	if fd != nil {
		oob = unix.UnixRights(int(fd.Fd()))
	}
	uc, ok := vm.qmp.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("hv: qmp is %T: %w", vm.qmp, errdefs.ErrInternal)
	}
	vm.qmp.SetWriteDeadline(time.Now().Add(qmpTimeout))
	if _, _, err := uc.WriteMsgUnix(append(b, '\n'), oob, nil); err != nil {
		return nil, fmt.Errorf("hv: qmp %s: %v: %w", name, err, errdefs.ErrClosed)
	}
	select {
	case r := <-reply:
		if r.err != nil {
			return nil, fmt.Errorf("hv: qmp %s: %v: %w", name, r.err, errdefs.ErrInternal)
		}
		return r.ret, nil
	case <-vm.qmpDone:
		return nil, fmt.Errorf("hv: qmp %s: qemu went away: %w", name, errdefs.ErrClosed)
	case <-time.After(qmpTimeout):
		return nil, fmt.Errorf("hv: qmp %s: no answer within %v: %w", name, qmpTimeout, errdefs.ErrTimeout)
	}
}

// reply hands a command's answer to the waiting command, if any.
func (vm *VM) reply(m qmpMessage) {
	var id string
	json.Unmarshal(m.ID, &id)
	vm.mu.Lock()
	ch := vm.pending
	if ch == nil || id != vm.pendingID {
		vm.mu.Unlock()
		return // an answer nobody waits for any more
	}
	vm.pending = nil
	vm.mu.Unlock()
	r := qmpReply{ret: m.Return}
	if m.Error != nil {
		r.err = errors.New(m.Error.Class + ": " + m.Error.Desc)
	}
	ch <- r
}

// ignoreShared turns on x-ignore-shared: a migration leaves guest memory
// that lives in a shared file out (source) or takes it from the file as
// mapped (destination).
func (vm *VM) ignoreShared() error { return vm.setIgnoreShared(true) }

// setIgnoreShared turns x-ignore-shared on or off (it stays as the VM's
// last restore or save set it).
func (vm *VM) setIgnoreShared(on bool) error {
	_, err := vm.command("migrate-set-capabilities", map[string]any{
		"capabilities": []map[string]any{{"capability": "x-ignore-shared", "state": on}},
	}, nil)
	return err
}

// Save writes the state of the VM's devices (and vCPUs) to state, for a
// VM whose RAM is Shared: its memory stays in Config.RAM.File. The VM is
// paused when Save returns nil, the file then holding what the state goes
// with; Resume runs it again. QEMU gets a duplicate of state; the caller
// closes its own.
func (vm *VM) Save(state *os.File, timeout time.Duration) error {
	if vm.ram == nil || !vm.ram.Shared {
		return fmt.Errorf("hv: save: the VM's RAM is not a shared file (Config.RAM): %w", errdefs.ErrInvalidState)
	}
	if err := vm.ignoreShared(); err != nil {
		return err
	}
	return vm.migrateTo(state, timeout)
}

// SaveWithRAM writes the whole VM to state: its devices, vCPUs and memory
// (QEMU sends a zero page as a header of a few bytes), whatever backs its
// RAM. The VM must be stopped first (Stop), so that what is saved is one
// instant; QEMU flushes its disks when the save completes. A VM whose save
// completed cannot run again (its disks are handed over); one whose save
// failed can (Resume). A Config.Incoming with IncomingWithRAM restores it.
func (vm *VM) SaveWithRAM(state *os.File, timeout time.Duration) error {
	// A VM restored from a template has it on: its state would then say
	// so, and a restore without it refuses the stream.
	if err := vm.setIgnoreShared(false); err != nil {
		return err
	}
	return vm.migrateTo(state, timeout)
}

// migrateTo sends the VM's migration stream into state, unthrottled (QEMU
// throttles a migration to 128 MiB/s by default), and waits for it.
func (vm *VM) migrateTo(state *os.File, timeout time.Duration) error {
	if _, err := vm.command("migrate-set-parameters", map[string]any{"max-bandwidth": int64(1) << 40}, nil); err != nil {
		return err
	}
	if _, err := vm.command("getfd", map[string]any{"fdname": "state"}, state); err != nil {
		return err
	}
	if _, err := vm.command("migrate", map[string]any{"uri": "fd:state"}, nil); err != nil {
		return err
	}
	return vm.awaitMigration("save", timeout)
}

// Stop pauses the VM's vCPUs (QMP stop); Resume runs them again.
func (vm *VM) Stop() error {
	_, err := vm.command("stop", nil, nil)
	return err
}

// Version is the running QEMU's version ("7.2.19", QMP query-version).
func (vm *VM) Version() (string, error) {
	ret, err := vm.command("query-version", nil, nil)
	if err != nil {
		return "", err
	}
	var v struct {
		QEMU struct {
			Major, Minor, Micro int
		} `json:"qemu"`
		Package string `json:"package"`
	}
	if err := json.Unmarshal(ret, &v); err != nil {
		return "", fmt.Errorf("hv: query-version: %v: %w", err, errdefs.ErrInternal)
	}
	return strings.TrimSpace(fmt.Sprintf("%d.%d.%d %s", v.QEMU.Major, v.QEMU.Minor, v.QEMU.Micro, v.Package)), nil
}

// restore loads Config.Incoming into a VM started with -incoming defer and
// runs it.
func (vm *VM) restore(state *os.File, withRAM bool, timeout time.Duration) error {
	if !withRAM {
		if err := vm.ignoreShared(); err != nil {
			return err
		}
	}
	if _, err := vm.command("getfd", map[string]any{"fdname": "state"}, state); err != nil {
		return err
	}
	if _, err := vm.command("migrate-incoming", map[string]any{"uri": "fd:state"}, nil); err != nil {
		return err
	}
	if err := vm.awaitMigration("restore", timeout); err != nil {
		return err
	}
	return vm.Resume()
}

// awaitMigration polls query-migrate until the migration completes or fails.
func (vm *VM) awaitMigration(what string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ret, err := vm.command("query-migrate", nil, nil)
		if err != nil {
			return err
		}
		var st struct {
			Status    string `json:"status"`
			ErrorDesc string `json:"error-desc"`
		}
		json.Unmarshal(ret, &st)
		switch st.Status {
		case "completed":
			return nil
		case "failed", "cancelled":
			return fmt.Errorf("hv: %s: migration %s: %s: %w", what, st.Status, st.ErrorDesc, errdefs.ErrInternal)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("hv: %s: migration still %q after %v: %w", what, st.Status, timeout, errdefs.ErrTimeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Resume runs a VM that Save (or a restore) left paused; a running VM stays
// running.
func (vm *VM) Resume() error {
	ret, err := vm.command("query-status", nil, nil)
	if err != nil {
		return err
	}
	var st struct {
		Running bool `json:"running"`
	}
	json.Unmarshal(ret, &st)
	if st.Running {
		return nil
	}
	_, err = vm.command("cont", nil, nil)
	return err
}

// NewRAM makes a memfd of miB MiB for Config.RAM, which Seal can later make
// read-only for good.
func NewRAM(name string, miB int) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("hv: memfd: %v: %w", err, errdefs.ErrLimit)
	}
	f := os.NewFile(uintptr(fd), name)
	if err := f.Truncate(int64(miB) << 20); err != nil {
		f.Close()
		return nil, fmt.Errorf("hv: memfd of %d MiB: %v: %w", miB, err, errdefs.ErrLimit)
	}
	return f, nil
}

// ramSeals make a memfd immutable: no writes (through write(2) or a shared
// writable mapping), no resizing, no unsealing.
const ramSeals = unix.F_SEAL_WRITE | unix.F_SEAL_GROW | unix.F_SEAL_SHRINK | unix.F_SEAL_SEAL

// Seal makes a NewRAM memfd immutable, so VMs can map it copy-on-write
// (RAM not Shared) without any of them reaching the others.
func Seal(f *os.File) error {
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, ramSeals); err != nil {
		return fmt.Errorf("hv: seal memfd: %v: %w", err, errdefs.ErrInternal)
	}
	return nil
}

// Sealed reports whether f is a memfd sealed as Seal does.
func Sealed(f *os.File) bool {
	s, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0)
	return err == nil && s&ramSeals == ramSeals
}
