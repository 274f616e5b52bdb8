package shim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/hv"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/shimapi"

	"github.com/boxlite/boxlite/internal/template"
)

// pauseSaveTimeout bounds writing a paused box's state (its memory at disk
// speed: a few seconds for a few GiB).
const pauseSaveTimeout = 5 * time.Minute

// pausedReason is the exit record of a box that its shim paused.
const pausedReason = "paused"

// maxPausedRecord bounds shimapi.PausedFile as read back.
const maxPausedRecord = 1 << 20

// ErrStateRefused marks a saved state that no longer fits (shimapi.Compat):
// it is discarded and the box is left stopped with its disk.
var errStateRefused = errors.New("saved state refused")

// pause serves TPause: it saves the box's VM into its directory and, once
// the state is synced, answers and ends the box; a pause that fails
// answers why and leaves the box running.
func (s *shim) pause(c *client, stream uint32) {
	res, err := s.saveState(nil)
	if err != nil {
		log.Printf("pause failed: %v", err)
		c.queueError(stream, err)
		return
	}
	reply, _ := protocol.Encode(protocol.TPause, stream, res)
	c.queue(reply) // teardown flushes it before it closes the client
	s.mu.Lock()
	s.reason, s.fault, s.stopping, s.pausing = pausedReason, false, true, false
	s.mu.Unlock()
	log.Printf("paused: state of %d bytes saved in %.0f ms; ending the VM", res.StateBytes, res.SaveMs)
	s.vm.Kill() // its disks belong to the saved state now
}

// saveState stops the VM and writes its state (shimapi.StateFile) and the
// record of what it depends on (shimapi.PausedFile).
// mayPause, when set, is asked under s.mu right before the pause begins
// (auto-pause: is the box still idle?); false fails it with errNotIdle.
func (s *shim) saveState(mayPause func() bool) (protocol.Paused, error) {
	var none protocol.Paused
	if len(s.cfg.Volumes) > 0 {
		return none, errdefs.Errorf(errdefs.ErrUnsupported,
			"pause box %s: it has volumes, and QEMU 7.2's virtio-fs device (vhost-user-fs) cannot be saved with the daemon's state; stop it instead", s.cfg.BoxID)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(s.cfg.Dir, &st); err != nil {
		return none, fmt.Errorf("pause box %s: %w", s.cfg.BoxID, err)
	}
	need := int64(s.cfg.MemoryMiB)<<20 + shimapi.PauseOverheadBytes
	if free := int64(st.Bavail) * int64(st.Bsize); free < need {
		return none, errdefs.Errorf(errdefs.ErrLimit, "pause box %s: %d MiB free on the disk of its directory, a state needs up to %d MiB; the box keeps running",
			s.cfg.BoxID, free>>20, need>>20)
	}
	compat, err := s.compat()
	if err != nil {
		return none, fmt.Errorf("pause box %s: %w", s.cfg.BoxID, err)
	}
	if compat.QEMUVersion, err = s.vm.Version(); err != nil {
		return none, fmt.Errorf("pause box %s: %w", s.cfg.BoxID, err)
	}
	s.mu.Lock()
	if s.stopping || s.pausing {
		s.mu.Unlock()
		return none, errdefs.Errorf(errdefs.ErrInvalidState, "pause box %s: it is stopping or pausing already", s.cfg.BoxID)
	}
	if mayPause != nil && !mayPause() {
		s.mu.Unlock()
		return none, errNotIdle
	}
	s.pausing = true
	// The streams of this shim's clients end with it: cancel them in the
	// guest as if their clients had gone (a detachable exec detaches and
	// runs on; AttachExec finds it after the resume), so that the resumed
	// agent sends nothing on streams nobody has.
	var open []uint32
	for global, r := range s.routes {
		open = append(open, global)
		delete(r.c.streams, r.local)
	}
	s.routes = map[uint32]route{}
	s.mu.Unlock()
	for _, global := range open {
		s.sendAgent(protocol.Frame{Type: protocol.TCancel, Stream: global})
	}
	if len(open) > 0 {
		time.Sleep(100 * time.Millisecond) // the agent takes them before its vCPUs stop
	}
	undo := func(err error) (protocol.Paused, error) {
		os.Remove(s.cfg.Path(shimapi.StateFile) + ".tmp")
		if rerr := s.vm.Resume(); rerr != nil {
			err = fmt.Errorf("%w; and the VM could not run on: %v", err, rerr)
			s.kill("pause failed and the VM could not run on: " + rerr.Error())
		}
		s.mu.Lock()
		s.pausing = false
		s.mu.Unlock()
		return none, fmt.Errorf("pause box %s: %w", s.cfg.BoxID, err)
	}
	t0 := time.Now()
	if err := s.vm.Stop(); err != nil {
		return undo(err)
	}
	path := s.cfg.Path(shimapi.StateFile)
	os.Remove(path + ".tmp")
	f, err := os.OpenFile(path+".tmp", os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return undo(err)
	}
	defer f.Close()
	if err := s.vm.SaveWithRAM(f, pauseSaveTimeout); err != nil {
		return undo(err)
	}
	migrated := time.Now()
	if err := f.Sync(); err != nil {
		return undo(err)
	}
	log.Printf("pause: stop and save %.0f ms, sync %.0f ms", float64(migrated.Sub(t0).Microseconds())/1000, float64(time.Since(migrated).Microseconds())/1000)
	fi, err := f.Stat()
	if err != nil {
		return undo(err)
	}
	saveMs := float64(time.Since(t0).Microseconds()) / 1000
	rec := shimapi.Paused{Format: shimapi.PauseFormat, SavedAt: time.Now().UTC(), StateBytes: fi.Size(), SaveMs: saveMs,
		Compat: compat, Hello: s.info.Hello, Accel: s.info.Accel, RAMBackend: s.vmcfg.RAM != nil || s.vmcfg.AnonRAMBackend || len(s.vmcfg.FS) > 0}
	s.mu.Lock()
	if h := s.health; h != nil {
		rec.Health, rec.HealthUpMs = h.status(), time.Since(h.since).Milliseconds()
	}
	s.mu.Unlock()
	b, _ := json.Marshal(rec)
	if err := os.Rename(path+".tmp", path); err != nil {
		return undo(err)
	}
	if err := writeSynced(s.cfg.Path(shimapi.PausedFile), b); err != nil {
		os.Remove(path)
		return undo(err)
	}
	return protocol.Paused{StateBytes: fi.Size(), SaveMs: saveMs}, nil
}

// writeSynced writes a file whole (a temporary file, synced, renamed) and
// syncs its directory.
func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path+".tmp", os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(path+".tmp", path)
	}
	if err != nil {
		os.Remove(path + ".tmp")
		return err
	}
	if d, err := os.Open(strings.TrimSuffix(path, "/"+lastElem(path))); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

func lastElem(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

// compat is what the box's VM depends on now (shimapi.Compat), all but the
// QEMU version, which the running QEMU tells.
func (s *shim) compat() (shimapi.Compat, error) {
	c := shimapi.Compat{MemoryMiB: s.vmcfg.MemoryMiB, CPUs: s.vmcfg.CPUs, Agent: s.info.Hello.Agent}
	var err error
	if c.KernelSHA, err = template.FileSHA256(s.vmcfg.Kernel, 0); err != nil {
		return c, err
	}
	if s.vmcfg.Initrd != "" {
		if c.InitrdSHA, err = template.FileSHA256(s.vmcfg.Initrd, 0); err != nil {
			return c, err
		}
	}
	c.Devices = append(c.Devices, "accel="+string(s.vmcfg.Accel), fmt.Sprintf("channel=%v", s.vmcfg.Channel), fmt.Sprintf("nic=%v", s.vmcfg.NIC != nil))
	for _, d := range s.vmcfg.Disks {
		id := filepath.Base(d.Path) // a fork's disk is another file of the same name
		if d.ReadOnly {             // an image layer: the very file, as it was
			if fi, err := os.Stat(d.Path); err == nil {
				id = fmt.Sprintf("%s:%d:%d", d.Path, fi.Size(), fi.ModTime().UnixNano())
			} else {
				id = d.Path
			}
		}
		c.Devices = append(c.Devices, fmt.Sprintf("disk %s ro=%v %s", d.Serial, d.ReadOnly, id))
	}
	return c, nil
}

// readPaused reads the box's pause record.
func (s *shim) readPaused() (shimapi.Paused, error) {
	var p shimapi.Paused
	f, err := os.OpenFile(s.cfg.Path(shimapi.PausedFile), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return p, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPausedRecord+1))
	if err != nil {
		return p, err
	}
	if len(b) > maxPausedRecord {
		return p, fmt.Errorf("%s is larger than %d bytes", shimapi.PausedFile, maxPausedRecord)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("%s: %v", shimapi.PausedFile, err)
	}
	p.Hello.Bound()
	return p, nil
}

// discardState removes a paused box's saved state: it was consumed by a
// resume, or refused.
func (s *shim) discardState() {
	os.Remove(s.cfg.Path(shimapi.PausedFile))
	os.Remove(s.cfg.Path(shimapi.StateFile))
}

// resumeVM starts the box's VM from the state its pause saved: the same
// machine, so no new identity; the network stack is started anew. A state
// that no longer fits (another QEMU, kernel, initramfs, agent or machine
// shape) is discarded with an errStateRefused error: the box is then
// stopped with its disk, and a start boots it. On success the state is
// consumed (the next pause saves anew).
func (s *shim) resumeVM(vmcfg hv.Config, start time.Time) (protocol.Hello, *protocol.Reader, error) {
	lap := laps(start)
	rec, err := s.readPaused()
	if err != nil {
		return protocol.Hello{}, nil, noRetry{fmt.Errorf("resume: %w", err)}
	}
	refuse := func(why string) (protocol.Hello, *protocol.Reader, error) {
		s.discardState()
		return rec.Hello, nil, noRetry{fmt.Errorf("resume box %s: its saved state no longer fits: %s; the state is discarded and the box is stopped with its disk (a start boots it): %w: %w",
			s.cfg.BoxID, why, errStateRefused, errdefs.ErrUnsupported)}
	}
	if rec.Format != shimapi.PauseFormat {
		return refuse(fmt.Sprintf("format %d, this shim reads %d", rec.Format, shimapi.PauseFormat))
	}
	now, err := s.compat()
	if err != nil {
		return rec.Hello, nil, noRetry{fmt.Errorf("resume: %w", err)}
	}
	now.Agent = "" // no hello yet: the initramfs's hash stands for the agent
	now.QEMUVersion = rec.Compat.QEMUVersion
	if why := rec.Compat.Mismatch(now); why != "" {
		return refuse(why)
	}
	state, err := os.OpenFile(s.cfg.Path(shimapi.StateFile), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return rec.Hello, nil, noRetry{fmt.Errorf("resume: %w", err)}
	}
	defer state.Close()
	fi, err := state.Stat()
	if err != nil {
		return rec.Hello, nil, noRetry{fmt.Errorf("resume: %w", err)}
	}
	if max := int64(s.cfg.MemoryMiB)<<20 + shimapi.PauseOverheadBytes; !fi.Mode().IsRegular() || fi.Size() > max {
		return refuse(fmt.Sprintf("%s is %d bytes, more than the box's memory allows (%d)", shimapi.StateFile, fi.Size(), max))
	}
	lap("check")
	vmcfg.Incoming, vmcfg.IncomingWithRAM = state, true
	vmcfg.AnonRAMBackend = rec.RAMBackend
	var mismatch string
	vmcfg.CheckIncoming = func(v string) error {
		if v != rec.Compat.QEMUVersion {
			mismatch = fmt.Sprintf("QEMU was %s, is now %s", rec.Compat.QEMUVersion, v)
			return errStateRefused
		}
		return nil
	}
	os.WriteFile(vmcfg.ConsoleLog, []byte(fmt.Sprintf("boxlite: this box resumed from the state saved at %s\n", rec.SavedAt.Format(time.RFC3339))), 0o600)
	if s.vm, err = hv.Start(vmcfg); err != nil {
		if mismatch != "" {
			return refuse(mismatch)
		}
		return rec.Hello, nil, noRetry{fmt.Errorf("resume: %w", err)}
	}
	lap("vmm")
	s.agent = s.vm.Channel()
	s.w = protocol.NewWriter(s.agent)
	r := protocol.NewReader(s.agent)
	if rec.Fork || rec.Restored {
		if err := s.forkIdentity(r, rec, start); err != nil {
			s.vm.Kill()
			return rec.Hello, nil, noRetry{fmt.Errorf("resume a fork: %w", err)}
		}
		lap("identity")
	} else if rec.Hello.Has(protocol.FeatureClock) {
		if err := s.setClock(r, start); err != nil {
			s.vm.Kill()
			return rec.Hello, nil, noRetry{fmt.Errorf("resume: clock: %w", err)}
		}
		lap("clock")
	}
	if err := s.serveNetwork(); err != nil {
		s.vm.Kill()
		return rec.Hello, nil, noRetry{fmt.Errorf("resume: network: %w", err)}
	}
	s.vmcfg.AnonRAMBackend = vmcfg.AnonRAMBackend // the next pause saves the same shape
	if !rec.Fork && rec.Health != nil {
		s.resumedHealth = &rec // startHealth goes on from it
	}
	s.discardState()
	log.Printf("resumed from the state saved at %s (%d bytes): %s", rec.SavedAt.Format(time.RFC3339), rec.StateBytes, strings.TrimSuffix(lap("network"), ", "))
	return rec.Hello, r, nil
}

// maxResumeStrays is how many frames of streams nobody has (sent before
// the pause, or by execs the pause cancelled) setClock lets pass.
const maxResumeStrays = 1024

// setClock steps the resumed guest's clock to the host's (protocol.TClock):
// the guest kept the time it was paused at.
func (s *shim) setClock(r *protocol.Reader, start time.Time) error {
	f, err := protocol.Encode(protocol.TClock, 0, protocol.Clock{UnixNano: time.Now().UnixNano()})
	if err == nil {
		err = s.sendAgent(f)
	}
	if err != nil {
		return err
	}
	return s.awaitAmidStrays(r, start, protocol.TClock)
}

// awaitAmidStrays waits for the agent's answer of type want on stream 0,
// letting pass up to maxResumeStrays frames of streams nobody has.
func (s *shim) awaitAmidStrays(r *protocol.Reader, start time.Time, want protocol.Type) error {
	for strays := 0; ; strays++ {
		f, err := s.awaitFrame(s.vm, r, start)
		if err != nil {
			return err
		}
		switch {
		case f.Stream != 0 && strays < maxResumeStrays:
			continue // a stream that ended with the pause
		case f.Stream != 0:
			return fmt.Errorf("guest agent protocol: %d frames on streams that are not open", strays)
		case f.Type == want:
			return nil
		case f.Type == protocol.TError:
			var e protocol.Error
			protocol.Decode(f, &e)
			return e.Err()
		}
		return fmt.Errorf("guest agent protocol: answer to %s is %s", want, f.Type)
	}
}
