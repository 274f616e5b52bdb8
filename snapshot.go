package boxlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/shimapi"
	"github.com/boxlite/boxlite/internal/sparse"
)

// SnapshotInfo describes a snapshot of a box's disk, as BoxLite's does.
type SnapshotInfo = abi.SnapshotInfo

// Snapshots live in the box's directory, so they go with it on remove:
//
//	snapshots/<id>/snapshot.json  SnapshotInfo, written last
//	snapshots/<id>/disk.ext4      the disk as it was (absent for an empty box)
//	snapshots/.tmp-*              a create or remove in progress (or crashed)
const (
	snapshotDir  = "snapshots"
	snapshotMeta = "snapshot.json"
	tmpPrefix    = ".tmp-"
)

// lockDisk makes sure no VM uses the box's disk, and none starts, until
// unlock: it takes the shim's own lock (shimapi.LockFile), so a shim started
// meanwhile, by any process, fails to start instead. BoxLite freezes a
// running guest to copy its disk; this agent cannot freeze yet, so a running
// box is refused.
func (b *Box) lockDisk(op string) (unlock func(), err error) {
	b.refresh()
	if s := b.State(); s == StateRemoved {
		return nil, errdefs.Errorf(errdefs.ErrInvalidState, "%s: box %s is removed", op, b.rec.ID)
	} else if s == StateStarting || s == StateRunning || s == StateStopping {
		return nil, errdefs.Errorf(errdefs.ErrInvalidState, "%s: box %s is %s; stop it first (its disk is only consistent while no VM runs it)", op, b.rec.ID, s)
	}
	f, err := os.OpenFile(b.path(shimapi.LockFile), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: box %s: %w", op, b.rec.ID, err)
	}
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		f.Close()
		return nil, errdefs.Errorf(errdefs.ErrInvalidState, "%s: box %s is running or starting in another process, or another disk operation holds it; stop it first", op, b.rec.ID)
	}
	return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}

// checkSnapshotName applies BoxLite's rule for snapshot names (safe as a
// file name, not hidden) with the box-name alphabet.
func checkSnapshotName(op, name string) error {
	if !validName(name) {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: snapshot name %q must be 1-64 of [a-zA-Z0-9_.-] and start with a letter or digit", op, name)
	}
	return nil
}

// SnapshotOptions are CreateSnapshotWith's settings.
type SnapshotOptions struct {
	// Memory keeps the box's memory and devices with its disk: the box must
	// be running (it stops only for the save) or paused. Restoring such a
	// snapshot brings the box back paused at that instant: its processes,
	// a session's interpreter, open files, as they were.
	Memory bool
}

// CreateSnapshot saves the box's disk as a snapshot named name (BoxLite's
// box.snapshot.create); an empty name becomes the snapshot's id. See
// CreateSnapshotWith.
func (b *Box) CreateSnapshot(ctx context.Context, name string) (SnapshotInfo, error) {
	return b.CreateSnapshotWith(ctx, name, SnapshotOptions{})
}

// CreateSnapshotWith saves the box as a snapshot named name (empty: the
// snapshot's id): its disk, and with opts.Memory its memory and devices.
// A running box is saved at one instant: its VM stops for the save (its
// streams stall meanwhile) and runs on. For a disk alone, `sync` runs in
// the box first (where the image has it, within 30 s); what is written
// after it and before the instant may be missing, as after a power cut
// (ext4's journal keeps the disk whole). A stopped box has no memory to keep (ErrInvalidState with
// Memory). The copy is a reflink where the host file system has them,
// else sparse: it costs what the disk uses, not its size.
func (b *Box) CreateSnapshotWith(ctx context.Context, name string, opts SnapshotOptions) (SnapshotInfo, error) {
	const op = "snapshot create"
	id := newID()
	if name == "" {
		name = id
	}
	if err := checkSnapshotName(op, name); err != nil {
		return SnapshotInfo{}, err
	}
	b.refresh()
	if b.State() == StateRunning {
		return b.snapshotRunning(ctx, op, id, name, opts)
	}
	unlock, err := b.lockDisk(op)
	if err != nil {
		return SnapshotInfo{}, err
	}
	defer unlock()
	paused := b.paused()
	if opts.Memory && !paused {
		return SnapshotInfo{}, errdefs.Errorf(errdefs.ErrInvalidState, "%s: box %s is %s: it has no memory to keep (a memory snapshot needs it running or paused)", op, b.rec.ID, b.State())
	}
	sweepTmp(b.path(snapshotDir)) // we hold the disk lock: no other create or remove runs
	return b.publishSnapshot(op, id, name, func(tmp string, info *SnapshotInfo) error {
		if ok, err := copyDiskIfAny(ctx, b.path(shimapi.DiskFile), filepath.Join(tmp, shimapi.DiskFile)); err != nil || !ok {
			return err
		}
		info.SizeBytes, info.ContainerDiskBytes = diskSizes(filepath.Join(tmp, shimapi.DiskFile))
		if !opts.Memory {
			return nil
		}
		var rec shimapi.Paused
		if err := readJSON(b.path(shimapi.PausedFile), &rec); err != nil {
			return err
		}
		return b.keepMemory(ctx, tmp, b.path(shimapi.StateFile), rec, info)
	})
}

// snapshotRunning saves the running box at one instant into a snapshot.
func (b *Box) snapshotRunning(ctx context.Context, op, id, name string, opts SnapshotOptions) (SnapshotInfo, error) {
	c, _, err := b.running(ctx, op)
	if err != nil {
		return SnapshotInfo{}, err
	}
	if _, err := b.findSnapshot(name); err == nil {
		return SnapshotInfo{}, errdefs.Errorf(errdefs.ErrAlreadyExists, "%s: box %s has a snapshot named %q", op, b.rec.ID, name)
	}
	if !opts.Memory {
		b.syncGuest(ctx)
	}
	save, _, err := b.saveRunning(ctx, c, op, protocol.ForkSave{DiskOnly: !opts.Memory})
	if err != nil {
		return SnapshotInfo{}, err
	}
	defer os.RemoveAll(save)
	return b.publishSnapshot(op, id, name, func(tmp string, info *SnapshotInfo) error {
		disk := filepath.Join(tmp, shimapi.DiskFile)
		if err := os.Rename(filepath.Join(save, shimapi.ForkDiskFile), disk); err != nil {
			return err
		}
		info.SizeBytes, info.ContainerDiskBytes = diskSizes(disk)
		if !opts.Memory {
			return nil
		}
		var rec shimapi.Paused
		if err := readJSON(filepath.Join(save, shimapi.ForkRecordFile), &rec); err != nil {
			return err
		}
		return b.keepMemory(ctx, tmp, filepath.Join(save, shimapi.ForkStateFile), rec, info)
	})
}

// keepMemory puts a saved state and its record (rec, as a pause or a fork
// wrote it) into the snapshot being made in tmp.
func (b *Box) keepMemory(ctx context.Context, tmp, state string, rec shimapi.Paused, info *SnapshotInfo) error {
	if err := linkOrCopy(ctx, state, filepath.Join(tmp, shimapi.StateFile)); err != nil {
		return err
	}
	rec.Fork = false // restored into the box itself (RestoreSnapshot sets Restored)
	if err := writeJSON(filepath.Join(tmp, shimapi.PausedFile), rec); err != nil {
		return err
	}
	info.Memory = true
	info.MemoryBytes, _ = diskSizes(filepath.Join(tmp, shimapi.StateFile))
	info.SizeBytes += info.MemoryBytes
	return nil
}

// publishSnapshot makes a snapshot: fill puts its files into a new
// directory, which then appears whole under the snapshot's id.
func (b *Box) publishSnapshot(op, id, name string, fill func(tmp string, info *SnapshotInfo) error) (SnapshotInfo, error) {
	if _, err := b.findSnapshot(name); err == nil {
		return SnapshotInfo{}, errdefs.Errorf(errdefs.ErrAlreadyExists, "%s: box %s has a snapshot named %q", op, b.rec.ID, name)
	}
	root := b.path(snapshotDir)
	if err := os.MkdirAll(root, 0o700); err != nil {
		return SnapshotInfo{}, fmt.Errorf("%s: %w", op, err)
	}
	tmp := filepath.Join(root, tmpPrefix+id)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return SnapshotInfo{}, fmt.Errorf("%s: %w", op, err)
	}
	info := SnapshotInfo{ID: id, BoxID: b.rec.ID, Name: name, CreatedAt: time.Now().Unix()}
	err := fill(tmp, &info)
	if err == nil {
		err = writeJSON(filepath.Join(tmp, snapshotMeta), info)
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(root, id))
	}
	if err != nil {
		os.RemoveAll(tmp)
		return SnapshotInfo{}, fmt.Errorf("%s %q of box %s: %w", op, name, b.rec.ID, err)
	}
	return info, nil
}

// Snapshots lists the box's snapshots, newest first (BoxLite's box.snapshot.list).
func (b *Box) Snapshots(ctx context.Context) ([]SnapshotInfo, error) {
	ents, err := os.ReadDir(b.path(snapshotDir))
	if errors.Is(err, fs.ErrNotExist) {
		return []SnapshotInfo{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot list: %w", err)
	}
	out := []SnapshotInfo{}
	for _, e := range ents {
		var si SnapshotInfo
		if validID(e.Name()) && readJSON(filepath.Join(b.path(snapshotDir), e.Name(), snapshotMeta), &si) == nil && si.ID == e.Name() {
			out = append(out, si)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedAt != out[j].CreatedAt {
			return out[i].CreatedAt > out[j].CreatedAt
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// Snapshot returns the snapshot named name (BoxLite's box.snapshot.get), or ErrNotFound.
func (b *Box) Snapshot(ctx context.Context, name string) (SnapshotInfo, error) {
	if err := checkSnapshotName("snapshot get", name); err != nil {
		return SnapshotInfo{}, err
	}
	return b.findSnapshot(name)
}

func (b *Box) findSnapshot(name string) (SnapshotInfo, error) {
	all, err := b.Snapshots(context.Background())
	if err != nil {
		return SnapshotInfo{}, err
	}
	for _, si := range all {
		if si.Name == name {
			return si, nil
		}
	}
	return SnapshotInfo{}, errdefs.Errorf(errdefs.ErrNotFound, "snapshot %q of box %s", name, b.rec.ID)
}

// lockedSnapshot finds snapshot name with the box's disk locked for op;
// unlock releases it.
func (b *Box) lockedSnapshot(op, name string) (si SnapshotInfo, unlock func(), err error) {
	if err := checkSnapshotName(op, name); err != nil {
		return si, nil, err
	}
	if unlock, err = b.lockDisk(op); err != nil {
		return si, nil, err
	}
	if si, err = b.findSnapshot(name); err != nil {
		unlock()
		return si, nil, fmt.Errorf("%s: %w", op, err)
	}
	return si, unlock, nil
}

// RemoveSnapshot deletes a snapshot (BoxLite's box.snapshot.remove), the
// box running or not. It disappears at once (a rename); its files are
// deleted after.
func (b *Box) RemoveSnapshot(ctx context.Context, name string) error {
	const op = "snapshot remove"
	var si SnapshotInfo
	if b.refresh(); b.State() == StateRunning {
		// The running box's disk is its shim's; a snapshot goes by a rename.
		if err := checkSnapshotName(op, name); err != nil {
			return err
		}
		var err error
		if si, err = b.findSnapshot(name); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	} else {
		var unlock func()
		var err error
		if si, unlock, err = b.lockedSnapshot(op, name); err != nil {
			return err
		}
		defer unlock()
	}
	root := b.path(snapshotDir)
	tmp := filepath.Join(root, tmpPrefix+si.ID)
	if err := os.Rename(filepath.Join(root, si.ID), tmp); err != nil {
		return fmt.Errorf("%s %q: %w", op, name, err)
	}
	return os.RemoveAll(tmp)
}

// RestoreSnapshot replaces the box's disk with the snapshot's (BoxLite's
// box.snapshot.restore); the box must not be running (stop or pause it
// first). A snapshot with memory brings the box back paused at its instant
// (any pause state it had is dropped): the next call resumes it with its
// processes as they were, a new boot id and fresh entropy, its own
// hostname and machine id; the streams it had open then are gone. A
// paused box takes only a snapshot with memory (its saved state goes with
// its current disk). The snapshot stays, to be restored again.
func (b *Box) RestoreSnapshot(ctx context.Context, name string) error {
	const op = "snapshot restore"
	si, unlock, err := b.lockedSnapshot(op, name)
	if err != nil {
		return err
	}
	defer unlock()
	dir := filepath.Join(b.path(snapshotDir), si.ID)
	if !si.Memory {
		if b.paused() {
			return errdefs.Errorf(errdefs.ErrInvalidState, "%s: box %s is paused, and its saved state goes with its current disk; resume it, or stop it (which drops the state), first", op, b.rec.ID)
		}
		if err := replaceDisk(ctx, filepath.Join(dir, shimapi.DiskFile), b.path(shimapi.DiskFile)); err != nil {
			return fmt.Errorf("%s %q of box %s: %w", op, name, b.rec.ID, err)
		}
		return nil
	}
	var rec shimapi.Paused
	if err := readJSON(filepath.Join(dir, shimapi.PausedFile), &rec); err != nil {
		return fmt.Errorf("%s %q of box %s: %w", op, name, b.rec.ID, err)
	}
	rec.Restored = true
	// The box is stopped while its files change: a crash in between leaves
	// it stopped (no pause record), never paused with the wrong disk.
	os.Remove(b.path(shimapi.PausedFile))
	os.Remove(b.path(shimapi.StateFile))
	err = replaceDisk(ctx, filepath.Join(dir, shimapi.DiskFile), b.path(shimapi.DiskFile))
	if err == nil {
		err = linkOrCopy(ctx, filepath.Join(dir, shimapi.StateFile), b.path(shimapi.StateFile))
	}
	if err == nil {
		err = writeJSON(b.path(shimapi.PausedFile), rec)
	}
	if err != nil {
		os.Remove(b.path(shimapi.StateFile))
		return fmt.Errorf("%s %q of box %s: %w", op, name, b.rec.ID, err)
	}
	os.Remove(b.path(shimapi.ExitFile))
	b.refresh()
	return nil
}

// replaceDisk makes dst a copy of src, atomically; with no src (a snapshot
// of a box that had no disk), dst is removed, and the next start makes a fresh one.
func replaceDisk(ctx context.Context, src, dst string) error {
	tmp := dst + ".restore"
	os.Remove(tmp)
	ok, err := copyDiskIfAny(ctx, src, tmp)
	if err != nil {
		return err
	}
	if !ok {
		if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// CloneOptions are Clone's settings.
type CloneOptions struct {
	Name     string // the clone's name; default none (names are unique)
	Snapshot string // clone this snapshot of the box instead of its disk as it is
}

// Clone makes a new, stopped box (BoxLite's clone_box) with the box's
// configuration and image and a copy of its disk (or of one of its
// snapshots), copy-on-write or sparse. A running box's disk is saved at
// one instant first (as a snapshot of it: synced, the VM stopped only for
// the copy). A clone of a memory snapshot is paused at the
// snapshot's instant, a fork of it: its next call resumes it as a machine of
// its own (hostname: its name, else "clone-" and 8 hex digits; fresh
// entropy, boot id, machine id; host ports picked anew).
func (b *Box) Clone(ctx context.Context, opts CloneOptions) (*Box, error) {
	const op = "clone"
	if err := b.rt.checkOpen(op); err != nil {
		return nil, err
	}
	cfg := b.config()
	cfg.Name = opts.Name
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var src string
	if opts.Snapshot == "" { // the box's own disk, as it is now
		path, release, err := b.diskNow(ctx, op)
		if err != nil {
			return nil, err
		}
		defer release()
		src = path
	}
	var mem string // a memory snapshot's directory
	if opts.Snapshot != "" {
		if err := checkSnapshotName(op, opts.Snapshot); err != nil {
			return nil, err
		}
		si, err := b.findSnapshot(opts.Snapshot)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		src = filepath.Join(b.path(snapshotDir), si.ID, shimapi.DiskFile)
		if si.Memory {
			mem = filepath.Join(b.path(snapshotDir), si.ID)
			cfg.Hostname = "clone-" + newID()[:8] // a machine of its own, as a fork
			if cfg.Name != "" && protocol.ValidHostname(cfg.Name) {
				cfg.Hostname = cfg.Name
			}
			cfg.Ports = append([]Port(nil), cfg.Ports...)
			for j := range cfg.Ports {
				cfg.Ports[j].HostPort = 0 // the source holds its own
			}
		}
	}
	stage, err := b.rt.newStage("clone")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage) // gone by then when adopted
	if _, err := copyDiskIfAny(ctx, src, filepath.Join(stage, shimapi.DiskFile)); err != nil {
		return nil, fmt.Errorf("%s box %s: %w", op, b.rec.ID, err)
	}
	if mem != "" {
		// A clone of a memory snapshot is a paused fork of that instant.
		var rec shimapi.Paused
		err := readJSON(filepath.Join(mem, shimapi.PausedFile), &rec)
		if err == nil {
			err = linkOrCopy(ctx, filepath.Join(mem, shimapi.StateFile), filepath.Join(stage, shimapi.StateFile))
		}
		if err == nil {
			rec.Fork, rec.Restored = true, false
			err = writeJSON(filepath.Join(stage, shimapi.PausedFile), rec)
		}
		if err != nil {
			return nil, fmt.Errorf("%s box %s: %w", op, b.rec.ID, err)
		}
	}
	if err := b.copySecrets(stage); err != nil {
		return nil, err
	}
	return b.rt.adopt(stage, cfg, b.rec.ImageDigest)
}

// newStage makes a directory beside the boxes' (records skips its name)
// where a new box is put together before adopt publishes it.
func (r *Runtime) newStage(what string) (string, error) {
	dir, err := os.MkdirTemp(filepath.Join(r.home, "boxes"), tmpPrefix+what+"-")
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return dir, nil
}

// adopt turns a staged box directory into a box of the home: under the home
// lock (names stay unique, the image cannot be pruned meanwhile) it writes the
// record and renames the directory to the box's id, so the box appears whole.
func (r *Runtime) adopt(stage string, cfg BoxConfig, digest string) (*Box, error) {
	unlock, err := r.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if _, err := r.images.Get(digest); err != nil {
		return nil, err
	}
	if cfg.Name != "" {
		if _, err := r.find(cfg.Name); err == nil {
			return nil, errdefs.Errorf(errdefs.ErrAlreadyExists, "box name %q is taken", cfg.Name)
		}
	}
	rec := record{ID: newID(), Config: cfg, ImageDigest: digest, CreatedAt: time.Now().UTC()}
	if err := writeJSON(filepath.Join(stage, "box.json"), rec); err != nil {
		return nil, err
	}
	if err := os.Rename(stage, filepath.Join(r.home, "boxes", rec.ID)); err != nil {
		return nil, err
	}
	return r.handle(rec), nil
}

// sweepTmp removes what crashed creates and removes left in dir.
func sweepTmp(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// copyDiskIfAny copies the disk src to the new file dst (see sparse.Copy); a
// missing src (a box never booted) copies nothing and reports false.
func copyDiskIfAny(ctx context.Context, src, dst string) (bool, error) {
	if _, err := os.Lstat(src); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return true, sparse.Copy(ctx, src, dst)
}

// diskSizes is what the file at path takes on the host, and its logical size.
func diskSizes(path string) (allocated, logical int64) {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return 0, 0
	}
	return st.Blocks * 512, st.Size
}
