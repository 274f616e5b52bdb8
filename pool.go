package boxlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// A warm pool (WithWarmPool) keeps boxes of one shape started and idle, so
// that Create of a box of that shape hands one over instead of starting
// it. A pool box's machine is made its own when it enters the pool (its
// restore's identity has a fresh boot id and machine id besides the host's
// clock and randomness, as a fork's), and nothing sees it before its
// owner; the hand-over (the shim's THandOver) gives it the owner's hostname
// (asking the guest only when it is not the default) and lifecycle
// settings, and the runtime writes its record (name, config) in the home.
// Its disk is its own already (a copy of its template's, used by nothing
// else). Pool boxes are hidden from
// List and Get until handed over, owned by the runtime (they stop with its
// process, and remove themselves; those a crash leaves, the next runtime
// that opens the home removes: poolorphans.go), and are refilled in the background,
// one boot at a time, within the pools' memory budget.
//
// What cannot be pooled, and starts as usual (a box that asks for it is
// never handed a pool box):
//   - volumes: their virtio-fs devices and virtiofsd are set up when the VM
//     starts, and QEMU's microvm has no hotplug to add them to a running VM;
//   - published ports: the box's network stack binds them when it starts,
//     and a pool box cannot know its owner's ports (nor hold host ports for
//     an owner that may never come);
//   - secrets: the box's CA goes into its guest with its first identity, and
//     the proxy that injects them is set up with its network stack;
//   - detach: a pool box's shim is tied to the runtime's process (its
//     parent-death pipe is given when it starts), which a detached box
//     must outlive;
//   - a shape no pool has (image, memory, CPUs, disk size, network, kernel
//     arguments, prestarted sessions, and for prestarted sessions the env,
//     working directory and user they start with).

// MaxWarmPoolSize bounds the boxes one warm pool keeps.
const MaxWarmPoolSize = 256

// poolSpec is a pool as WithWarmPool asks for it.
type poolSpec struct {
	size int
	cfg  BoxConfig
}

// WithWarmPool keeps size boxes of the shape that image and opts give
// (the options a Create of that shape passes; per-box ones such as the
// name, hostname, env or auto-remove are the hand-over's, not the pool's)
// started and idle, so that a Create of that shape hands one over (see
// pool.go for what cannot be pooled). The pool fills in the background once
// the image is in the store (the first Create of it pulls it, as does
// WaitWarmPools). Several pools may be given. Default: none.
func WithWarmPool(size int, image string, opts ...BoxOption) Option {
	return func(o *runtimeOptions) error {
		if size < 1 || size > MaxWarmPoolSize {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "warm pool of %s: size %d is outside 1..%d", image, size, MaxWarmPoolSize)
		}
		cfg := defaultBoxConfig(image)
		for _, opt := range opts {
			if err := opt(&cfg); err != nil {
				return err
			}
		}
		if err := cfg.validate(); err != nil {
			return fmt.Errorf("warm pool of %s: %w", image, err)
		}
		if err := cfg.poolable(); err != nil {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "warm pool of %s: %v", image, err)
		}
		if cfg.Name != "" {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "warm pool of %s: a pool's boxes have no name (the hand-over names a box)", image)
		}
		o.pools = append(o.pools, poolSpec{size: size, cfg: cfg})
		return nil
	}
}

// WithWarmPoolMemoryMiB bounds the guest memory the boxes of all warm
// pools hold together (ready or starting); a pool that would pass it waits
// for room. Default: no bound beyond each pool's size (and the host memory
// reserve every start keeps, WithHostMemoryReserveMiB).
func WithWarmPoolMemoryMiB(mib int64) Option {
	return func(o *runtimeOptions) error {
		if mib < 1 {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "warm pool memory %d MiB: must be at least 1", mib)
		}
		o.poolMemMiB = mib
		return nil
	}
}

// poolable says why a box of cfg cannot come from a warm pool (nil: it can).
func (c *BoxConfig) poolable() error {
	switch {
	case len(c.Volumes) > 0:
		return errors.New("volumes cannot be pooled: their devices are set up when the VM starts (microvm has no hotplug)")
	case len(c.Ports) > 0:
		return errors.New("published ports cannot be pooled: the network stack binds them when the box starts")
	case len(c.Secrets) > 0:
		return errors.New("secrets cannot be pooled: their CA and proxy are set up when the box starts")
	case c.Capabilities != nil || c.Security != nil || c.HealthCheck != nil:
		return errors.New("capabilities, security options and health checks cannot be pooled: pool boxes run with the defaults and no health check")
	case c.Detach:
		return errors.New("a detached box cannot be pooled: pool boxes are tied to the runtime's process from their start")
	}
	return nil
}

// poolShape is what a pool box and the box it is handed over as must share.
type poolShape struct {
	Digest     string      `json:"digest"`
	MemoryMiB  int         `json:"memory_mib"`
	CPUs       int         `json:"cpus"`
	DiskSizeGB int         `json:"disk_size_gb"`
	Network    NetworkSpec `json:"network"`
	KernelArgs []string    `json:"kernel_args,omitempty"`
	Prestart   []string    `json:"prestart,omitempty"`
	// The requests of prestarted sessions carry these (parkRequests).
	Env        map[string]string `json:"env,omitempty"`
	WorkingDir string            `json:"working_dir,omitempty"`
	User       string            `json:"user,omitempty"`
}

// shapeKey is the pool key of a box of cfg made from the image with digest.
func shapeKey(cfg BoxConfig, digest string) string {
	s := poolShape{Digest: digest, MemoryMiB: cfg.MemoryMiB, CPUs: cfg.CPUs, DiskSizeGB: cfg.DiskSizeGB,
		Network: cfg.Network, KernelArgs: cfg.KernelArgs, Prestart: cfg.Prestart}
	if len(cfg.Prestart) > 0 {
		s.Env, s.WorkingDir, s.User = cfg.Env, cfg.WorkingDir, cfg.User
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// pool keeps the boxes of one shape.
type pool struct {
	rt   *Runtime
	spec poolSpec
	kick chan struct{} // a refill may be due (buffered, 1)

	mu       sync.Mutex
	key      string // shapeKey, once the image is in the store
	ready    []*Box // started, warmed up, idle: oldest first
	starting int
	failed   error // why the last start failed; nil once one succeeds
}

// pools are the runtime's warm pools and their memory budget.
type pools struct {
	list   []*pool
	memMiB int64 // 0: no bound
	// pressed: the host is short of memory (poolpressure.go); no refills.
	pressed atomic.Bool
	owner   *poolOwner // held while the runtime has pools
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	changedMu sync.Mutex
	changed   chan struct{} // closed (and replaced) when a pool changes
}

// notify wakes the waiters of a change of any pool (WaitWarmPools).
func (ps *pools) notify() {
	ps.changedMu.Lock()
	if ps.changed != nil {
		close(ps.changed)
	}
	ps.changed = make(chan struct{})
	ps.changedMu.Unlock()
}

// changes is closed at the next change of any pool.
func (ps *pools) changes() <-chan struct{} {
	ps.changedMu.Lock()
	defer ps.changedMu.Unlock()
	if ps.changed == nil {
		ps.changed = make(chan struct{})
	}
	return ps.changed
}

// startPools takes the runtime's pool owner lock (poolorphans.go) and
// starts a refill loop per pool; each fills at once if its image is in
// the store.
func (r *Runtime) startPools(specs []poolSpec, memMiB int64, pressure func() (pressureSource, error)) error {
	r.pools.memMiB = memMiB
	if len(specs) > 0 {
		owner, err := takePoolOwner(r.home)
		if err != nil {
			return err
		}
		r.pools.owner = owner
	}
	r.pools.ctx, r.pools.cancel = context.WithCancel(context.Background())
	if len(specs) > 0 {
		if pressure == nil {
			pressure = hostPressure
		}
		if src, err := pressure(); err != nil {
			log.Printf("boxlite: warm pools: they will not shrink under host memory pressure: %v", err)
		} else {
			r.pools.wg.Add(1)
			go func() { defer r.pools.wg.Done(); r.watchPressure(r.pools.ctx, src, pressureQuiet) }()
		}
	}
	for _, s := range specs {
		p := &pool{rt: r, spec: s, kick: make(chan struct{}, 1)}
		r.pools.list = append(r.pools.list, p)
		p.kickRefill()
		r.pools.wg.Add(1)
		go func() { defer r.pools.wg.Done(); p.refillLoop(r.pools.ctx) }()
	}
	return nil
}

// closePools stops the refills and removes the pools' boxes.
func (r *Runtime) closePools() {
	if r.pools.cancel == nil {
		return
	}
	r.pools.cancel()
	r.pools.wg.Wait()
	var wg sync.WaitGroup
	for _, p := range r.pools.list {
		p.mu.Lock()
		boxes := p.ready
		p.ready = nil
		p.mu.Unlock()
		for _, b := range boxes {
			wg.Add(1)
			go func() { defer wg.Done(); b.Remove(context.Background(), true) }()
		}
	}
	wg.Wait()
	// A box whose removal failed is left to the next runtime's sweep.
	r.pools.owner.release(r.home)
}

func (p *pool) kickRefill() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// heldMiB is the guest memory of the boxes all pools hold or are starting.
func (r *Runtime) poolHeldMiB() int64 {
	var n int64
	for _, p := range r.pools.list {
		p.mu.Lock()
		n += int64(len(p.ready)+p.starting) * int64(p.spec.cfg.MemoryMiB)
		p.mu.Unlock()
	}
	return n
}

// refillLoop starts boxes, one at a time, until the pool is full, each time
// it is kicked (at start, after a hand-over, by WaitWarmPools, by a Create
// of its image): it never polls.
func (p *pool) refillLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		}
		if _, err := p.rt.images.Get(p.spec.cfg.Image); err != nil {
			// Not in the store yet: the pool fills once a Create of it
			// (which pulls it) or WaitWarmPools kicks it again.
			p.mu.Lock()
			p.failed = fmt.Errorf("image: %w", err)
			p.mu.Unlock()
			p.rt.pools.notify()
			continue
		}
		for ctx.Err() == nil && p.wantsOne() {
			err := p.addOne(ctx)
			p.mu.Lock()
			p.failed = err
			p.mu.Unlock()
			p.rt.pools.notify()
			if err != nil {
				if ctx.Err() == nil {
					log.Printf("boxlite: warm pool of %s: %v (it refills at its next hand-over)", p.spec.cfg.Image, err)
				}
				break
			}
		}
	}
}

// wantsOne reports whether the pool has room for one more box, and if so
// counts it as starting.
func (p *pool) wantsOne() bool {
	if !p.roomForOne() {
		return false // the pressure's end, or a box leaving, kicks the refill
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ready)+p.starting >= p.spec.size {
		return false
	}
	p.starting++
	return true
}

// poolWarmup is the command a pool box runs once before it is ready: the
// first exec of a restored VM pays for TCG translating the agent's exec
// path again; the box's owner should not.
var poolWarmup = Command{Argv: []string{"true"}, Timeout: 30 * time.Second}

// addOne starts a pool box (from its template, as any box of its shape),
// warms it up and adds it to the ready list.
func (p *pool) addOne(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			p.mu.Lock()
			p.starting--
			p.mu.Unlock()
		}
	}()
	r := p.rt
	img, err := r.images.Get(p.spec.cfg.Image)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	cfg := p.spec.cfg
	// A pool box left by a dead runtime goes with it; it never pauses
	// itself in the pool; its hostname is the hand-over's.
	cfg.AutoRemove, cfg.AutoPause, cfg.Hostname = true, 0, ""
	b, err := r.register(cfg, img.Digest, r.pools.owner.id)
	if err != nil {
		return err
	}
	r.forget(b)          // not the runtime's until handed over (Close stops it as a pool box)
	b.inPool.Store(true) // its start pauses no box for the running-memory cap
	fail := func(err error) error {
		b.Remove(context.Background(), true)
		return err
	}
	if err := b.Start(ctx); err != nil {
		return fail(err)
	}
	if _, err := b.Run(ctx, poolWarmup); err != nil {
		return fail(fmt.Errorf("warm-up exec: %w", err))
	}
	p.mu.Lock()
	p.key = shapeKey(p.spec.cfg, img.Digest)
	p.starting--
	p.ready = append(p.ready, b)
	p.mu.Unlock()
	return nil
}

// take hands a pool box of cfg's shape over as a box of cfg, or returns
// nil: no pool of that shape, none ready, or cfg cannot be pooled. A box
// whose hand-over fails is removed, and the caller starts one as usual.
func (r *Runtime) takeFromPool(ctx context.Context, cfg BoxConfig, digest string) *Box {
	if len(r.pools.list) == 0 || cfg.poolable() != nil {
		return nil
	}
	if cfg.Name != "" {
		if _, err := r.find(cfg.Name); err == nil {
			return nil // register says it is taken; no pool box is spent on it
		}
	}
	key := shapeKey(cfg, digest)
	for _, p := range r.pools.list {
		p.mu.Lock()
		if p.key != key || len(p.ready) == 0 {
			if p.key == "" && p.spec.cfg.Image == cfg.Image {
				p.kickRefill() // its image may be in the store now
			}
			p.mu.Unlock()
			continue
		}
		b := p.ready[0]
		p.ready = p.ready[1:]
		p.mu.Unlock()
		p.kickRefill()
		b.inPool.Store(false)
		if err := r.makeRoom(ctx, b); err != nil { // the running-memory cap, as for any start
			b.inPool.Store(true)
			p.mu.Lock()
			p.ready = append([]*Box{b}, p.ready...)
			p.mu.Unlock()
			return nil
		}
		if err := r.handOver(ctx, b, cfg); err != nil {
			log.Printf("boxlite: warm pool of %s: hand-over of box %s failed, starting one instead: %v", cfg.Image, b.rec.ID, err)
			go b.Remove(context.Background(), true)
			return nil
		}
		return b
	}
	return nil
}

// handOverTimeout bounds the shim's hand-over (an identity in the guest).
const handOverTimeout = 15 * time.Second

// handOver makes pool box b a box of cfg: its machine (shim), then its
// record (name unique in the home) and this runtime's handle.
func (r *Runtime) handOver(ctx context.Context, b *Box, cfg BoxConfig) error {
	b.mu.Lock()
	c, state := b.conn, b.state
	b.mu.Unlock()
	if state != StateRunning || c == nil {
		return errdefs.Errorf(errdefs.ErrInvalidState, "pool box %s is %s", b.rec.ID, state)
	}
	req := protocol.HandOver{Hostname: firstNonEmpty(cfg.Hostname, DefaultHostname), AutoRemove: cfg.AutoRemove, AutoPauseNs: int64(cfg.AutoPause)}
	var got protocol.HandOver
	if err := c.requestWithin(ctx, protocol.THandOver, req, &got, handOverTimeout); err != nil {
		return err
	}
	unlock, err := r.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if cfg.Name != "" {
		if _, err := r.find(cfg.Name); err == nil {
			return errdefs.Errorf(errdefs.ErrAlreadyExists, "create box: name %q is taken", cfg.Name)
		}
	}
	rec := b.rec
	rec.Config, rec.Pool, rec.CreatedAt = cfg, false, time.Now().UTC()
	if err := writeJSON(b.path("box.json"), rec); err != nil {
		return err
	}
	b.mu.Lock()
	b.rec, b.handedOver = rec, true
	b.mu.Unlock()
	r.mu.Lock()
	r.boxes[rec.ID] = b
	r.mu.Unlock()
	return nil
}

// WaitWarmPools fills the runtime's warm pools and returns once each is
// full (or the memory budget leaves no room), or a pool's start failed (its
// error), or ctx ends. It pulls a pool's image if the store lacks it.
func (r *Runtime) WaitWarmPools(ctx context.Context) error {
	for _, p := range r.pools.list {
		if _, err := r.images.Get(p.spec.cfg.Image); errors.Is(err, errdefs.ErrNotFound) {
			if _, err := r.Pull(ctx, p.spec.cfg.Image); err != nil {
				return fmt.Errorf("warm pool of %s: %w", p.spec.cfg.Image, err)
			}
		}
		p.mu.Lock()
		p.failed = nil // this wait's own attempt decides
		p.mu.Unlock()
		p.kickRefill()
	}
	for {
		changed := r.pools.changes()
		full := true
		for _, p := range r.pools.list {
			p.mu.Lock()
			n, s, failed := len(p.ready), p.starting, p.failed
			p.mu.Unlock()
			if n >= p.spec.size || s == 0 && !p.roomForOne() {
				continue
			}
			if s == 0 && failed != nil {
				return fmt.Errorf("warm pool of %s: %w", p.spec.cfg.Image, failed)
			}
			full = false
		}
		if full {
			return nil
		}
		select {
		case <-ctx.Done():
			return errdefs.Errorf(errdefs.ErrTimeout, "wait for warm pools: %v", ctx.Err())
		case <-changed:
		}
	}
}

// roomForOne: the memory budget leaves room for one more box of p, and
// the host is not short of memory.
func (p *pool) roomForOne() bool {
	if p.rt.pools.pressed.Load() {
		return false
	}
	m := p.rt.pools.memMiB
	return m == 0 || p.rt.poolHeldMiB()+int64(p.spec.cfg.MemoryMiB) <= m
}

// WarmPoolStats is a warm pool's state.
type WarmPoolStats struct {
	Image    string `json:"image"`
	Size     int    `json:"size"`
	Ready    int    `json:"ready"`
	Starting int    `json:"starting"`
}

// WarmPools describes the runtime's warm pools.
func (r *Runtime) WarmPools() []WarmPoolStats {
	var out []WarmPoolStats
	for _, p := range r.pools.list {
		p.mu.Lock()
		out = append(out, WarmPoolStats{Image: p.spec.cfg.Image, Size: p.spec.size, Ready: len(p.ready), Starting: p.starting})
		p.mu.Unlock()
	}
	return out
}
