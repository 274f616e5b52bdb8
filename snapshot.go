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

// CreateSnapshot saves the box's disk as a snapshot named name (BoxLite's
// box.snapshot.create); an empty name becomes the snapshot's id. The box must
// not be running (ErrInvalidState). The copy is a reflink where the host
// file system has them, else sparse: it costs what the disk uses, not its size.
func (b *Box) CreateSnapshot(ctx context.Context, name string) (SnapshotInfo, error) {
	const op = "snapshot create"
	id := newID()
	if name == "" {
		name = id
	}
	if err := checkSnapshotName(op, name); err != nil {
		return SnapshotInfo{}, err
	}
	unlock, err := b.lockDisk(op)
	if err != nil {
		return SnapshotInfo{}, err
	}
	defer unlock()
	if _, err := b.findSnapshot(name); err == nil {
		return SnapshotInfo{}, errdefs.Errorf(errdefs.ErrAlreadyExists, "%s: box %s has a snapshot named %q", op, b.rec.ID, name)
	}
	root := b.path(snapshotDir)
	if err := os.MkdirAll(root, 0o700); err != nil {
		return SnapshotInfo{}, fmt.Errorf("%s: %w", op, err)
	}
	sweepTmp(root) // we hold the disk lock: no other create or remove runs
	tmp := filepath.Join(root, tmpPrefix+id)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return SnapshotInfo{}, fmt.Errorf("%s: %w", op, err)
	}
	info := SnapshotInfo{ID: id, BoxID: b.rec.ID, Name: name, CreatedAt: time.Now().Unix()}
	err = func() error {
		if ok, err := copyDiskIfAny(ctx, b.path(shimapi.DiskFile), filepath.Join(tmp, shimapi.DiskFile)); err != nil || !ok {
			return err
		}
		info.SizeBytes, info.ContainerDiskBytes = diskSizes(filepath.Join(tmp, shimapi.DiskFile))
		return nil
	}()
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

// RemoveSnapshot deletes a snapshot (BoxLite's box.snapshot.remove). It
// disappears at once (a rename); its files are deleted after.
func (b *Box) RemoveSnapshot(ctx context.Context, name string) error {
	const op = "snapshot remove"
	si, unlock, err := b.lockedSnapshot(op, name)
	if err != nil {
		return err
	}
	defer unlock()
	root := b.path(snapshotDir)
	tmp := filepath.Join(root, tmpPrefix+si.ID)
	if err := os.Rename(filepath.Join(root, si.ID), tmp); err != nil {
		return fmt.Errorf("%s %q: %w", op, name, err)
	}
	return os.RemoveAll(tmp)
}

// RestoreSnapshot replaces the box's disk with the snapshot's (BoxLite's
// box.snapshot.restore); the box must be stopped. The snapshot stays.
func (b *Box) RestoreSnapshot(ctx context.Context, name string) error {
	const op = "snapshot restore"
	si, unlock, err := b.lockedSnapshot(op, name)
	if err != nil {
		return err
	}
	defer unlock()
	if b.paused() {
		return errdefs.Errorf(errdefs.ErrInvalidState, "%s: box %s is paused, and its saved state goes with its current disk; resume it, or stop it (which drops the state), first", op, b.rec.ID)
	}
	disk := b.path(shimapi.DiskFile)
	if err := replaceDisk(ctx, filepath.Join(b.path(snapshotDir), si.ID, shimapi.DiskFile), disk); err != nil {
		return fmt.Errorf("%s %q of box %s: %w", op, name, b.rec.ID, err)
	}
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
// snapshots), copy-on-write or sparse. The box must not be running.
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
	unlock, err := b.lockDisk(op)
	if err != nil {
		return nil, err
	}
	defer unlock()
	src := b.path(shimapi.DiskFile)
	if opts.Snapshot != "" {
		if err := checkSnapshotName(op, opts.Snapshot); err != nil {
			return nil, err
		}
		si, err := b.findSnapshot(opts.Snapshot)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		src = filepath.Join(b.path(snapshotDir), si.ID, shimapi.DiskFile)
	}
	stage, err := b.rt.newStage("clone")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage) // gone by then when adopted
	if _, err := copyDiskIfAny(ctx, src, filepath.Join(stage, shimapi.DiskFile)); err != nil {
		return nil, fmt.Errorf("%s box %s: %w", op, b.rec.ID, err)
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
