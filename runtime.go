package boxlite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/image"
)

// Runtime owns a home directory: its image store and its boxes. Several
// runtimes (in one or many processes) may share a home; mutations of the box
// registry take a file lock on <home>/lock, and each running box is owned by
// its shim, so no process holds the home for its whole life.
type Runtime struct {
	home        string
	assets      assets
	images      *image.Store
	pull        []image.PullOption // mirrors, insecure registries, keychain
	search      []string           // registries unqualified names are looked up in (registries.go)
	outputLimit int64              // per stream of a collected result
	qemu        string             // the VMM binary; empty: the shim's default
	requireKVM  bool
	maxBoots    int   // VMs booting at once, across the processes of this home
	memReserve  int64 // MiB of available host memory box starts leave alone
	templates   bool  // warm starts (WithTemplates)
	memCap      int64 // MiB of guest memory running boxes may hold (memcap.go); 0: no cap

	memMu sync.Mutex // one start at a time makes room under memCap

	counters runtimeCounters // RuntimeMetrics (metrics.go)
	pools    pools           // warm pools (pool.go)

	mu     sync.Mutex
	boxes  map[string]*Box // handles opened by this runtime, by id
	closed bool
}

// NewRuntime opens (creating if needed) a home directory.
func NewRuntime(opts ...Option) (*Runtime, error) {
	var o runtimeOptions
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.qemu == "" {
		o.qemu = os.Getenv("BOXLITE_QEMU")
	}
	if o.maxBoots == 0 {
		o.maxBoots = defaultMaxBoots()
	}
	if o.memReserve == 0 {
		o.memReserve = defaultMemoryReserveMiB()
	}
	if o.noTemplate == nil {
		v := strings.ToLower(strings.TrimSpace(os.Getenv("BOXLITE_TEMPLATES")))
		off := v == "0" || v == "off"
		o.noTemplate = &off
	}
	if strings.EqualFold(strings.TrimSpace(os.Getenv("BOXLITE_ACCEL")), "kvm") {
		o.requireKVM = true
	}
	if o.home == "" {
		h, err := defaultHome()
		if err != nil {
			return nil, err
		}
		o.home = h
	}
	home, err := filepath.Abs(o.home)
	if err != nil {
		return nil, err
	}
	if err := secureHome(home); err != nil {
		return nil, err
	}
	pull, err := o.pullOptions()
	if err != nil {
		return nil, err
	}
	images, err := image.Open(filepath.Join(home, "images"))
	if err != nil {
		return nil, err
	}
	if o.output == 0 {
		o.output = DefaultOutputLimit
	}
	r := &Runtime{home: home, assets: findAssets(o.assets), images: images, pull: pull, search: o.searchRegistries(), outputLimit: o.output,
		qemu: o.qemu, requireKVM: o.requireKVM, maxBoots: o.maxBoots, memReserve: o.memReserve, memCap: o.memCap, templates: !*o.noTemplate,
		boxes: map[string]*Box{}}
	r.sweepPoolOrphans()
	if err := r.startPools(o.pools, o.poolMemMiB, o.pressure); err != nil {
		return nil, err
	}
	return r, nil
}

// defaultHome is $BOXLITE_HOME, else ~/.boxlite. There is no fallback to a
// shared directory such as /tmp, where another user could plant the home.
func defaultHome() (string, error) {
	if h := os.Getenv("BOXLITE_HOME"); h != "" {
		return h, nil
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", errdefs.Errorf(errdefs.ErrInvalidArgument, "runtime home: no home directory (%v): set BOXLITE_HOME or WithHome", err)
	}
	return filepath.Join(h, ".boxlite"), nil
}

// secureHome creates the home if needed and makes sure only its owner can
// reach it: a home owned by another user is refused (it could hold anything),
// one open to others is closed (0700), as are the directories in it.
func secureHome(home string) error {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("runtime home %s: %w", home, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(home, &st); err != nil {
		return fmt.Errorf("runtime home %s: %w", home, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "runtime home %s is not a directory", home)
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		return errdefs.Errorf(errdefs.ErrInvalidState, "runtime home %s is owned by uid %d, not by this user (uid %d): refusing to use it", home, st.Uid, uid)
	}
	for _, d := range []string{home, filepath.Join(home, "boxes"), filepath.Join(home, "images"), filepath.Join(home, "state")} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("runtime home %s: %w", home, err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return fmt.Errorf("runtime home %s: %w", home, err)
		}
	}
	return nil
}

// Home is the runtime's home directory.
func (r *Runtime) Home() string { return r.home }

// Images is the runtime's image store.
func (r *Runtime) Images() *image.Store { return r.images }

// Pull fetches an image from its registry (or a mirror) into the store, with
// the runtime's registry settings; opts add to them (image.WithProgress).
// See image.Store.Pull.
func (r *Runtime) Pull(ctx context.Context, ref string, opts ...image.PullOption) (image.PullResult, error) {
	if err := r.checkOpen("pull"); err != nil {
		return image.PullResult{}, err
	}
	all := append(append([]image.PullOption{}, r.pull...), opts...)
	if res, searched, err := r.pullSearch(ctx, ref, all); searched {
		return res, err
	}
	return r.images.Pull(ctx, ref, all...)
}

// PruneImages removes what no box of this home uses: images without a name
// (every image with all), then the blobs and ext4 layers no image needs.
// A box keeps its image even when the image has lost its names. See image.Store.GC.
func (r *Runtime) PruneImages(ctx context.Context, all bool) (image.GCResult, error) {
	// Under the home lock, so that no box registers an image that GC is removing (see register).
	unlock, err := r.lock()
	if err != nil {
		return image.GCResult{}, err
	}
	defer unlock()
	recs, err := r.records()
	if err != nil {
		return image.GCResult{}, err
	}
	var inUse []string
	for _, rec := range recs {
		inUse = append(inUse, rec.ImageDigest)
	}
	res, err := r.images.GC(ctx, image.GCOptions{InUse: inUse, All: all})
	r.dropTemplates()
	return res, err
}

// templateDir holds the warm-start templates of the image with digest d.
func (r *Runtime) templateDir(d string) string {
	return filepath.Join(r.home, "templates", strings.TrimPrefix(d, "sha256:"))
}

// RemoveImage removes the image name or digest ref from the store (see
// image.Store.Remove), and the templates of an image left without a name.
func (r *Runtime) RemoveImage(ref string) error {
	err := r.images.Remove(ref)
	r.dropTemplates()
	return err
}

// dropTemplates removes the templates of images the store no longer lists.
func (r *Runtime) dropTemplates() {
	imgs, err := r.images.List()
	if err != nil {
		return
	}
	keep := map[string]bool{}
	for _, i := range imgs {
		keep[filepath.Base(r.templateDir(i.Digest))] = true
	}
	ents, _ := os.ReadDir(filepath.Join(r.home, "templates"))
	for _, e := range ents {
		if !keep[e.Name()] {
			os.RemoveAll(filepath.Join(r.home, "templates", e.Name()))
		}
	}
}

// Close stops the boxes this runtime started (they would die with the
// process anyway), except detached ones, which keep running, and releases
// its handles.
func (r *Runtime) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.closePools()
	r.mu.Lock()
	boxes := make([]*Box, 0, len(r.boxes))
	for _, b := range r.boxes {
		boxes = append(boxes, b)
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, b := range boxes {
		wg.Add(1)
		go func() { defer wg.Done(); b.release() }()
	}
	wg.Wait()
	return nil
}

// lockTimeout bounds the wait for the home lock, which is only ever held for
// a registry change (never across a boot).
const lockTimeout = 30 * time.Second

// lock serialises registry mutations across processes sharing the home.
func (r *Runtime) lock() (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(r.home, "lock"), os.O_CREATE|os.O_RDWR|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(lockTimeout)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			f.Close()
			return nil, err
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, errdefs.Errorf(errdefs.ErrTimeout, "home %s: another process has held its lock for %s", r.home, lockTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}

func (r *Runtime) checkOpen(op string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errdefs.Errorf(errdefs.ErrClosed, "%s: runtime is closed", op)
	}
	return nil
}

// Create registers a box made from an image and returns it configured, not
// booted (as BoxLite's create): Start boots it, and so does the first
// operation that needs its VM (Exec, Run, CopyIn, CopyOut, sessions). Its
// options are checked here, so a bad one fails now. An image that is not in
// the store is pulled first (see Pull); one in the store is used as it is,
// even when the registry has a newer one under its name, as docker does.
func (r *Runtime) Create(ctx context.Context, imageRef string, opts ...BoxOption) (*Box, error) {
	if err := r.checkOpen("create box"); err != nil {
		return nil, err
	}
	cfg := defaultBoxConfig(imageRef)
	for _, opt := range opts {
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := cfg.validateSecrets(func(format string, args ...any) error {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "box options: "+format, args...)
	}, true); err != nil {
		return nil, err
	}
	if err := checkHostMemory(cfg); err != nil {
		return nil, fmt.Errorf("create box: %w", err)
	}
	if err := r.assets.check(); err != nil {
		return nil, fmt.Errorf("create box: %w", err)
	}
	img, err := r.findImage(imageRef)
	if errors.Is(err, errdefs.ErrNotFound) && !strings.HasPrefix(imageRef, "sha256:") {
		var res image.PullResult
		if res, err = r.Pull(ctx, imageRef); err == nil {
			img = res.Image
		} else {
			err = fmt.Errorf("image %q is not in the store, and pulling it failed: %w", imageRef, err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("create box: %w", err)
	}
	if b := r.takeFromPool(ctx, cfg, img.Digest); b != nil {
		r.counters.created.Add(1)
		return b, nil
	}
	b, err := r.register(cfg, img.Digest, "")
	if err != nil {
		return nil, err
	}
	r.counters.created.Add(1)
	return b, nil
}

// register writes a new box's directory under the home lock, so that names
// stay unique across processes.
// A pool box (pool.go) is hidden from List and Get until handed over.
// register writes a new box's record; poolOwner is set for a pool box.
func (r *Runtime) register(cfg BoxConfig, digest string, poolOwner string) (*Box, error) {
	unlock, err := r.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	// The image may have gone since Create found it: PruneImages holds this lock too.
	if _, err := r.images.Get(digest); err != nil {
		return nil, fmt.Errorf("create box: %w", err)
	}
	if cfg.Name != "" {
		if _, err := r.find(cfg.Name); err == nil {
			return nil, errdefs.Errorf(errdefs.ErrAlreadyExists, "create box: name %q is taken", cfg.Name)
		}
	}
	rec := record{ID: newID(), Config: cfg, ImageDigest: digest, CreatedAt: time.Now().UTC(), Pool: poolOwner != "", PoolOwner: poolOwner}
	dir := filepath.Join(r.home, "boxes", rec.ID)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	if err := writeSecrets(dir, rec.ID, cfg.Secrets); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := writeJSON(filepath.Join(dir, "box.json"), rec); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return r.handle(rec), nil
}

// record is a box's persistent description, <home>/boxes/<id>/box.json.
type record struct {
	ID          string    `json:"id"`
	Config      BoxConfig `json:"config"`
	ImageDigest string    `json:"image_digest"`
	CreatedAt   time.Time `json:"created_at"`
	// Pool: a warm pool's box, not yet handed over (hidden from List and Get).
	Pool bool `json:"pool,omitempty"`
	// PoolOwner: the owner lock of the runtime whose pool it is
	// (poolorphans.go).
	PoolOwner string `json:"pool_owner,omitempty"`
}

func (r *Runtime) handle(rec record) *Box {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b, ok := r.boxes[rec.ID]; ok {
		return b
	}
	b := &Box{rt: r, rec: rec, dir: filepath.Join(r.home, "boxes", rec.ID)}
	b.state = b.restingState()
	r.boxes[rec.ID] = b
	return b
}

func (r *Runtime) forget(b *Box) {
	r.mu.Lock()
	delete(r.boxes, b.rec.ID)
	r.mu.Unlock()
}

// Get opens a box by id, unique id prefix, or name.
func (r *Runtime) Get(ctx context.Context, idOrName string) (*Box, error) {
	if err := r.checkOpen("get box"); err != nil {
		return nil, err
	}
	rec, err := r.find(idOrName)
	if err != nil {
		return nil, err
	}
	b := r.handle(rec)
	b.refresh()
	return b, nil
}

func (r *Runtime) records() ([]record, error) {
	dirs, err := os.ReadDir(filepath.Join(r.home, "boxes"))
	if err != nil {
		return nil, err
	}
	var recs []record
	for _, d := range dirs {
		var rec record
		// The id names the directory that Remove deletes: it must be the
		// directory's own name, in the form newID makes.
		if validID(d.Name()) && readJSON(filepath.Join(r.home, "boxes", d.Name(), "box.json"), &rec) == nil && rec.ID == d.Name() {
			recs = append(recs, rec)
		}
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].CreatedAt.After(recs[j].CreatedAt) })
	return recs, nil
}

func (r *Runtime) find(idOrName string) (record, error) {
	if idOrName == "" {
		return record{}, errdefs.Errorf(errdefs.ErrInvalidArgument, "box id or name is empty")
	}
	recs, err := r.records()
	if err != nil {
		return record{}, err
	}
	var matches []record
	for _, rec := range recs {
		if rec.Pool {
			continue
		}
		if rec.ID == idOrName || rec.Config.Name == idOrName {
			return rec, nil
		}
		if len(idOrName) >= 4 && len(idOrName) < len(rec.ID) && rec.ID[:len(idOrName)] == idOrName {
			matches = append(matches, rec)
		}
	}
	if len(matches) == 1 {
		return matches[0], nil
	}
	if len(matches) > 1 {
		return record{}, errdefs.Errorf(errdefs.ErrInvalidArgument, "box %q is ambiguous (%d boxes match)", idOrName, len(matches))
	}
	return record{}, errdefs.Errorf(errdefs.ErrNotFound, "box %q", idOrName)
}

// List describes every box in the home, newest first (as BoxLite lists them).
func (r *Runtime) List(ctx context.Context) ([]BoxInfo, error) {
	recs, err := r.records()
	if err != nil {
		return nil, err
	}
	infos := make([]BoxInfo, 0, len(recs))
	for _, rec := range recs {
		if rec.Pool {
			continue
		}
		b := r.handle(rec)
		b.refresh()
		infos = append(infos, b.Info())
	}
	return infos, nil
}

// Remove deletes a box and its disk. A running box is refused unless force,
// which stops it first.
func (r *Runtime) Remove(ctx context.Context, idOrName string, force bool) error {
	b, err := r.Get(ctx, idOrName)
	if err != nil {
		return fmt.Errorf("remove: %w", err)
	}
	return b.Remove(ctx, force)
}

func validID(s string) bool {
	if len(s) != 12 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

func newID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	// A temp file of its own (0600, O_EXCL): two processes writing the same
	// record (two starts of one box) must not rename each other's.
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return errdefs.Errorf(errdefs.ErrNotFound, "%s", path)
		}
		return err
	}
	return json.Unmarshal(b, v)
}
