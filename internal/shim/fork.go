package shim

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/shimapi"
	"github.com/boxlite/boxlite/internal/sparse"
)

// fork serves TFork: the box is saved for forks at one instant (its VM
// stopped: memory, devices and writable disk; with req.DiskOnly the disk
// alone), then runs on; its streams stay open (they only stall while the
// VM is stopped).
func (s *shim) fork(c *client, stream uint32, req protocol.ForkSave) {
	res, err := s.saveFork(req)
	if err != nil {
		log.Printf("fork failed: %v", err)
		c.queueError(stream, err)
		return
	}
	reply, _ := protocol.Encode(protocol.TFork, stream, res)
	c.queue(reply)
	log.Printf("saved for a fork: state of %d bytes and the disk in %.0f ms", res.StateBytes, res.SaveMs)
}

func (s *shim) saveFork(req protocol.ForkSave) (protocol.Paused, error) {
	var none protocol.Paused
	diskOnly, dir := req.DiskOnly, s.cfg.Dir
	if req.Into != "" {
		if !shimapi.ValidSaveDir(req.Into) {
			return none, errdefs.Errorf(errdefs.ErrInvalidArgument, "fork box %s: save into %q: not a save directory", s.cfg.BoxID, req.Into)
		}
		dir = filepath.Join(s.cfg.Dir, req.Into)
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
			return none, errdefs.Errorf(errdefs.ErrInvalidArgument, "fork box %s: save into %q: no such directory", s.cfg.BoxID, req.Into)
		}
	}
	at := func(f string) string { return filepath.Join(dir, f) }
	if len(s.cfg.Volumes) > 0 && !diskOnly {
		return none, errdefs.Errorf(errdefs.ErrUnsupported,
			"fork box %s: it has volumes, and QEMU 7.2's virtio-fs device (vhost-user-fs) cannot be saved", s.cfg.BoxID)
	}
	disk := s.cfg.Path(shimapi.DiskFile)
	var dst syscall.Stat_t
	if err := syscall.Stat(disk, &dst); err != nil {
		return none, fmt.Errorf("fork box %s: %w", s.cfg.BoxID, err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(s.cfg.Dir, &st); err != nil {
		return none, fmt.Errorf("fork box %s: %w", s.cfg.BoxID, err)
	}
	need := int64(s.cfg.MemoryMiB)<<20 + shimapi.PauseOverheadBytes + dst.Blocks*512
	if diskOnly {
		need = dst.Blocks * 512
	}
	if free := int64(st.Bavail) * int64(st.Bsize); free < need {
		return none, errdefs.Errorf(errdefs.ErrLimit, "fork box %s: %d MiB free on the disk of its directory, a fork's save needs up to %d MiB",
			s.cfg.BoxID, free>>20, need>>20)
	}
	compat, err := s.compat()
	if err != nil {
		return none, fmt.Errorf("fork box %s: %w", s.cfg.BoxID, err)
	}
	if compat.QEMUVersion, err = s.vm.Version(); err != nil {
		return none, fmt.Errorf("fork box %s: %w", s.cfg.BoxID, err)
	}
	s.mu.Lock()
	if s.stopping || s.pausing {
		s.mu.Unlock()
		return none, errdefs.Errorf(errdefs.ErrInvalidState, "fork box %s: it is stopping or pausing", s.cfg.BoxID)
	}
	s.pausing = true // no new stream meanwhile
	var open []uint32
	for global := range s.routes {
		open = append(open, global)
	}
	s.mu.Unlock()
	files := []string{shimapi.ForkStateFile, shimapi.ForkDiskFile, shimapi.ForkRecordFile}
	for _, f := range files {
		os.Remove(at(f))
		os.Remove(at(f) + ".tmp")
	}
	done := func(err error) (protocol.Paused, error) {
		if err != nil {
			for _, f := range files {
				os.Remove(at(f))
				os.Remove(at(f) + ".tmp")
			}
		}
		if rerr := s.vm.Resume(); rerr != nil {
			s.kill("fork: the VM could not run on: " + rerr.Error())
			if err == nil {
				err = rerr
			}
		}
		s.mu.Lock()
		s.pausing = false
		s.touch()
		s.mu.Unlock()
		if err != nil {
			return none, fmt.Errorf("fork box %s: %w", s.cfg.BoxID, err)
		}
		return none, nil
	}
	if len(open) > shimapi.MaxForkStreams {
		return done(errdefs.Errorf(errdefs.ErrLimit, "%d open streams, a fork takes at most %d", len(open), shimapi.MaxForkStreams))
	}
	t0 := time.Now()
	if err := s.vm.Stop(); err != nil {
		return done(err)
	}
	if diskOnly {
		// QEMU drained and flushed the disk when it stopped the vCPUs: the
		// copy is the disk of that instant, as after a power cut (ext4's
		// journal makes it whole on the next mount).
		ctx, cancel := context.WithTimeout(context.Background(), pauseSaveTimeout)
		err := sparse.Copy(ctx, disk, at(shimapi.ForkDiskFile))
		cancel()
		if err != nil {
			return done(err)
		}
		saveMs := float64(time.Since(t0).Microseconds()) / 1000
		if _, err := done(nil); err != nil {
			return none, err
		}
		return protocol.Paused{SaveMs: saveMs}, nil
	}
	path := at(shimapi.ForkStateFile)
	f, err := os.OpenFile(path+".tmp", os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return done(err)
	}
	defer f.Close()
	if err := s.vm.SaveWithRAM(f, pauseSaveTimeout); err != nil {
		return done(err)
	}
	if err := f.Sync(); err != nil {
		return done(err)
	}
	fi, err := f.Stat()
	if err != nil {
		return done(err)
	}
	// QEMU flushed the disk when the save completed and the vCPUs are
	// stopped: the copy is the disk of that instant.
	ctx, cancel := context.WithTimeout(context.Background(), pauseSaveTimeout)
	err = sparse.Copy(ctx, disk, at(shimapi.ForkDiskFile))
	cancel()
	if err != nil {
		return done(err)
	}
	saveMs := float64(time.Since(t0).Microseconds()) / 1000
	rec := shimapi.Paused{Format: shimapi.PauseFormat, SavedAt: time.Now().UTC(), StateBytes: fi.Size(), SaveMs: saveMs,
		Compat: compat, Hello: s.info.Hello, Accel: s.info.Accel, RAMBackend: s.vmcfg.RAM != nil || s.vmcfg.AnonRAMBackend || len(s.vmcfg.FS) > 0,
		Fork: true, Cancel: open}
	b, _ := json.Marshal(rec)
	if err := os.Rename(path+".tmp", path); err != nil {
		return done(err)
	}
	if err := writeSynced(at(shimapi.ForkRecordFile), b); err != nil {
		return done(err)
	}
	if _, err := done(nil); err != nil {
		return none, err
	}
	return protocol.Paused{StateBytes: fi.Size(), SaveMs: saveMs}, nil
}

// sweepSaves removes the save directories (protocol.ForkSave.Into) of a
// fork or snapshot whose client crashed: none runs while the box starts.
func sweepSaves(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if shimapi.ValidSaveDir(e.Name()) {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// forkIdentity makes a VM restored from another box's state (a fork) a
// machine of its own: the streams that box had open are cancelled in it
// (their processes end as if their clients had gone; detachable ones run
// on, for AttachExec), and it gets the host's clock, fresh entropy and its
// own hostname (protocol.Identity), as a box restored from a template.
func (s *shim) forkIdentity(r *protocol.Reader, rec shimapi.Paused, start time.Time) error {
	if len(rec.Cancel) > shimapi.MaxForkStreams {
		return fmt.Errorf("%s: %d streams to cancel, at most %d", shimapi.PausedFile, len(rec.Cancel), shimapi.MaxForkStreams)
	}
	if !rec.Hello.Has(protocol.FeatureIdentity) {
		return errdefs.Errorf(errdefs.ErrUnsupported, "the agent cannot take an identity (an older agent)")
	}
	var last uint32
	for _, id := range rec.Cancel {
		if err := s.sendAgent(protocol.Frame{Type: protocol.TCancel, Stream: id}); err != nil {
			return err
		}
		last = max(last, id)
	}
	s.mu.Lock()
	s.next = max(s.next, last+1) // the agent may know those ids still
	s.mu.Unlock()
	id := newIdentity(s.cfg.Hostname, true)
	if rec.Restored { // a snapshot of the box itself keeps its machine id
		id.MachineID = ""
	}
	f, err := protocol.Encode(protocol.TIdentity, 0, id)
	if err == nil {
		err = s.sendAgent(f)
	}
	if err != nil {
		return err
	}
	return s.awaitAmidStrays(r, start, protocol.TIdentity)
}

// newIdentity is what makes a VM a machine of its own (protocol.Identity):
// the host's clock, fresh entropy and the hostname; with machine, also a new
// boot id and machine id, for a VM whose kernel may have made its boot id
// already (a fork of a running box; a warm pool's box, whose identity is
// made when it enters the pool, unseen until its hand-over).
func newIdentity(hostname string, machine bool) protocol.Identity {
	id := protocol.Identity{UnixNano: time.Now().UnixNano(), Seed: make([]byte, 64), Hostname: hostname}
	if id.Hostname == "" {
		id.Hostname = "boxlite" // a runtime that predates Config.Hostname
	}
	rand.Read(id.Seed)
	if !machine {
		return id
	}
	var u [16]byte
	rand.Read(u[:])
	u[6], u[8] = u[6]&0x0f|0x40, u[8]&0x3f|0x80 // a version 4 UUID, as the kernel makes
	id.BootID = fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	rand.Read(u[:])
	id.MachineID = fmt.Sprintf("%x", u[:])
	return id
}
