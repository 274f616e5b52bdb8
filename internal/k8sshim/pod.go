package k8sshim

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/containerd/containerd/api/types"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// A pod's box has one volume: the pod's shared directory on the host
// (shareName in the sandbox's bundle), a mount with shared propagation,
// at containersDir in the box. Each container has a directory there named
// by its id, holding its root file system (rootfs, a bind of the
// snapshotter's mounts) and its volumes (m0, m1, ...: binds of the host
// directories and files its spec mounts). What the shim mounts there while
// the box runs reaches the box's file daemon by propagation, so containers
// join a running pod without a copy.
const (
	containersDir = "/var/lib/boxlite/containers"
	shareName     = "boxlite-pod"
)

// Deadlines of the box's own steps.
const (
	bootTimeout    = 5 * time.Minute // TCG boots in seconds; admission may queue
	stopTimeout    = 30 * time.Second
	releaseTimeout = 10 * time.Second // a container's root in its box
)

// pod is one box: a pod sandbox's, or a standalone container's.
type pod struct {
	id      string // the sandbox's container id
	share   string // the host's shared directory
	box     *boxlite.Box
	members map[string]bool
}

// container is a task: its root, its init process and its execs.
type container struct {
	id, bundle   string
	pod          *pod
	rootfs       string   // the host directory of its root file system
	mounted      bool     // rootfs is the shim's mount
	dir          string   // its directory in the pod's share
	binds        []string // what the shim mounted in dir
	boxRoot      string   // its root in the box
	rootBinds    []boxlite.RootBind
	memLimit     uint64                // its spec's memory limit (bytes; 0: none)
	oom          *boxlite.RootOOMWatch // its cgroup's OOM watch (limits.go); nil: none
	oomStopped   bool                  // its watch was stopped (Delete): none starts again
	oomKills     uint64                // the OOM kills the box has told
	oomPublished uint64                // ... of which TaskOOM events were published
	oomAt        time.Time             // when the last TaskOOM was published
	init         *proc
	execs        map[string]*proc
}

// prepareRootfs mounts the snapshotter's mounts on bundle/rootfs (or takes
// the spec's root directory when containerd gave none) and returns it.
func prepareRootfs(bundle string, s *spec, ms []*types.Mount) (dir string, mounted bool, err error) {
	if len(ms) == 0 {
		if s.Root == nil || s.Root.Path == "" {
			return "", false, errdefs.Errorf(errdefs.ErrInvalidArgument, "bundle %s: no rootfs mounts and no root in config.json", bundle)
		}
		dir = s.Root.Path
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(bundle, dir)
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return "", false, errdefs.Errorf(errdefs.ErrNotFound, "bundle %s: root %s is not a directory", bundle, dir)
		}
		return dir, false, nil
	}
	dir = filepath.Join(bundle, "rootfs")
	if err := os.Mkdir(dir, 0o711); err != nil && !os.IsExist(err) {
		return "", false, errdefs.Errorf(errdefs.ErrInternal, "rootfs: %v", err)
	}
	rms := make([]rootMount, len(ms))
	for i, m := range ms {
		rms[i] = rootMount{Type: m.Type, Source: m.Source, Options: m.Options}
	}
	if err := mountRootfs(rms, dir); err != nil {
		return "", false, err
	}
	return dir, true, nil
}

// newPod makes the shared directory of a pod whose sandbox's bundle is
// bundle.
func newPod(id, bundle string) (*pod, error) {
	share := filepath.Join(bundle, shareName)
	if err := os.Mkdir(share, 0o700); err != nil {
		return nil, errdefs.Errorf(errdefs.ErrInternal, "pod %s: %v", id, err)
	}
	if err := makeShared(share); err != nil {
		os.Remove(share)
		return nil, errdefs.Errorf(errdefs.ErrInternal, "pod %s: %v", id, err)
	}
	return &pod{id: id, share: share, members: map[string]bool{}}, nil
}

// removeShare unmounts the pod's shared directory (and everything below
// it) and removes it, never recursing into what might still be mounted.
func (p *pod) removeShare() {
	if err := removeShare(p.share); err != nil {
		log.Printf("pod %s: %v", p.id, err)
	}
}

// removeShare unmounts a pod's shared directory with all below it, then
// removes the empty mount points place made (two levels), never
// recursing into anything else. A missing directory is not an error.
func removeShare(share string) error {
	if _, err := os.Lstat(share); os.IsNotExist(err) {
		return nil
	}
	if err := unmountAll(share); err != nil {
		return err
	}
	ents, _ := os.ReadDir(share)
	for _, e := range ents {
		dir := filepath.Join(share, e.Name())
		sub, _ := os.ReadDir(dir)
		for _, f := range sub {
			os.Remove(filepath.Join(dir, f.Name()))
		}
		os.Remove(dir)
	}
	return os.Remove(share)
}

// place puts container c's root file system and volumes into the pod's
// shared directory, and says where they are in the box.
func (c *container) place(p *pod, sp *spec) (err error) {
	c.dir = filepath.Join(p.share, c.id)
	c.boxRoot = containersDir + "/" + c.id + "/rootfs"
	if err := os.Mkdir(c.dir, 0o700); err != nil {
		return errdefs.Errorf(errdefs.ErrInternal, "container %s: %v", c.id, err)
	}
	defer func() {
		if err != nil {
			c.unplace()
		}
	}()
	bind := func(src, name string, readOnly bool) error {
		fi, err := os.Stat(src)
		if err != nil {
			return errdefs.Errorf(errdefs.ErrNotFound, "container %s: mount source %s: %v", c.id, src, err)
		}
		dst := filepath.Join(c.dir, name)
		if fi.IsDir() {
			err = os.Mkdir(dst, 0o700)
		} else {
			var f *os.File
			if f, err = os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
				f.Close()
			}
		}
		if err != nil {
			return errdefs.Errorf(errdefs.ErrInternal, "container %s: %v", c.id, err)
		}
		c.binds = append(c.binds, dst)
		if err := bindAt(src, dst, readOnly); err != nil {
			return errdefs.Errorf(errdefs.ErrInternal, "container %s: %v", c.id, err)
		}
		return nil
	}
	readOnly := sp.Root != nil && sp.Root.Readonly
	if readOnly {
		// The agent cannot make the volumes' mount points in a
		// read-only root: make them now.
		for _, m := range sp.Mounts {
			if !m.shared() {
				continue
			}
			if err := m.check(); err != nil {
				return fmt.Errorf("container %s: %w", c.id, err)
			}
			fi, err := os.Stat(m.Source)
			if err != nil {
				return errdefs.Errorf(errdefs.ErrNotFound, "container %s: mount source %s: %v", c.id, m.Source, err)
			}
			if err := makeTarget(c.rootfs, m.Destination, !fi.IsDir()); err != nil {
				return errdefs.Errorf(errdefs.ErrInvalidArgument, "container %s: mount point %s: %v", c.id, m.Destination, err)
			}
		}
	}
	if err := bind(c.rootfs, "rootfs", readOnly); err != nil {
		return err
	}
	n := 0
	for _, m := range sp.Mounts {
		if !m.shared() {
			continue
		}
		if err := m.check(); err != nil {
			return fmt.Errorf("container %s: %w", c.id, err)
		}
		if n++; n > maxMounts {
			return errdefs.Errorf(errdefs.ErrLimit, "container %s: more than %d volumes", c.id, maxMounts)
		}
		name := "m" + strconv.Itoa(n-1)
		if err := bind(m.Source, name, m.readOnly()); err != nil {
			return err
		}
		c.rootBinds = append(c.rootBinds, boxlite.RootBind{Source: containersDir + "/" + c.id + "/" + name,
			Target: filepath.Clean(m.Destination), ReadOnly: m.readOnly()})
	}
	return nil
}

// unplace undoes place: unmounts (lazily: the box's file daemon may hold
// files of them) and removes what place made, never recursively.
func (c *container) unplace() {
	for i := len(c.binds) - 1; i >= 0; i-- {
		if err := unmountAll(c.binds[i]); err != nil {
			log.Printf("container %s: %v", c.id, err)
			continue
		}
		os.Remove(c.binds[i])
	}
	c.binds = nil
	if c.dir != "" {
		os.Remove(c.dir)
	}
}

// startBox boots the box of pod p, whose first container has spec sp.
func (s *service) startBox(ctx context.Context, p *pod, sp *spec) error {
	rt, err := s.runtime()
	if err != nil {
		return err
	}
	ports, err := sp.hostPorts()
	if err != nil {
		return fmt.Errorf("pod %s: %w", p.id, err)
	}
	mem, cpus := sp.boxShape()
	opts := []boxlite.BoxOption{
		boxlite.WithMemoryMiB(mem), boxlite.WithCPUs(cpus),
		boxlite.WithVolume(p.share, containersDir, false),
		boxlite.WithBootTimeout(bootTimeout),
	}
	// A pod on the host's network gets the box's user-mode network: its
	// connections leave through the host's sockets. A pod with a network
	// namespace that CNI set up (its path in the spec) gets that
	// namespace's interface (a tap there, internal/podnet); one with a
	// new, empty namespace (ctr run's default) has only lo, as it would
	// under runc.
	net := boxlite.NetworkSpec{Mode: boxlite.NetworkDisabled}
	if sp.hostNetwork() {
		net.Mode = boxlite.NetworkEnabled
	} else if ns, err := sp.netnsPath(); err != nil {
		return err
	} else if ns != "" {
		net = boxlite.NetworkSpec{Mode: boxlite.NetworkEnabled, NetNS: ns}
	}
	opts = append(opts, boxlite.WithNetwork(net))
	if len(ports) > 0 {
		// The network stack binds them as the box starts (a port in use
		// fails the start, naming it) and closes them with the box.
		opts = append(opts, boxlite.WithPorts(ports...))
	}
	if protocol.ValidHostname(sp.Hostname) {
		opts = append(opts, boxlite.WithHostname(sp.Hostname))
	}
	bctx, cancel := context.WithTimeout(ctx, bootTimeout)
	defer cancel()
	box, err := rt.Create(bctx, s.opts.Image, opts...)
	if err != nil {
		return fmt.Errorf("pod %s: create its box: %w", p.id, err)
	}
	if err := box.Start(bctx); err != nil {
		s.removeBox(box)
		return fmt.Errorf("pod %s: start its box: %w", p.id, err)
	}
	p.box = box
	log.Printf("pod %s: box %s running (%d MiB, %d CPUs, %d host ports)", p.id, box.ID(), mem, cpus, len(ports))
	return nil
}

// removeBox stops and removes a pod's box.
func (s *service) removeBox(box *boxlite.Box) {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := box.Remove(ctx, true); err != nil {
		log.Printf("box %s: remove: %v", box.ID(), err)
	}
}

// runtime is the boxlite runtime, made on first use.
func (s *service) runtime() (*boxlite.Runtime, error) {
	s.rtOnce.Do(func() {
		s.rt, s.rtErr = boxlite.NewRuntime()
	})
	return s.rt, s.rtErr
}
