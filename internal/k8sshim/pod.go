package k8sshim

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/containerd/containerd/api/types"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// containersDir is where container roots are in a box: a container's
// root file system is containersDir/<id>/rootfs.
const containersDir = "/var/lib/boxlite/containers"

// Deadlines of the box's own steps.
const (
	bootTimeout = 5 * time.Minute // TCG boots in seconds; admission may queue
	stopTimeout = 30 * time.Second
	copyTimeout = 5 * time.Minute
)

// pod is one box: a pod sandbox's, or a standalone container's.
type pod struct {
	id      string // the sandbox's container id
	box     *boxlite.Box
	members map[string]bool
}

// container is a task: its root, its init process and its execs.
type container struct {
	id, bundle string
	pod        *pod
	rootfs     string // the host directory of its root file system
	mounted    bool   // rootfs is the shim's mount
	boxRoot    string // its root in the box
	init       *proc
	execs      map[string]*proc
}

// guestRoot is a container's root in its box.
func guestRoot(id string) string { return containersDir + "/" + id + "/rootfs" }

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

// newPod boots the box of a pod whose first container is c with spec s:
// c's root file system is a volume of the box (virtio-fs).
func (s *service) newPod(ctx context.Context, c *container, sp *spec) (*pod, error) {
	rt, err := s.runtime()
	if err != nil {
		return nil, err
	}
	mem, cpus := sp.boxShape()
	readOnly := sp.Root != nil && sp.Root.Readonly
	opts := []boxlite.BoxOption{
		boxlite.WithMemoryMiB(mem), boxlite.WithCPUs(cpus),
		boxlite.WithVolume(c.rootfs, c.boxRoot, readOnly),
		boxlite.WithNetwork(boxlite.NetworkSpec{Mode: boxlite.NetworkDisabled}),
		boxlite.WithBootTimeout(bootTimeout),
	}
	if protocol.ValidHostname(sp.Hostname) {
		opts = append(opts, boxlite.WithHostname(sp.Hostname))
	}
	bctx, cancel := context.WithTimeout(ctx, bootTimeout)
	defer cancel()
	box, err := rt.Create(bctx, s.opts.Image, opts...)
	if err != nil {
		return nil, fmt.Errorf("pod %s: create its box: %w", c.id, err)
	}
	if err := box.Start(bctx); err != nil {
		s.removeBox(box)
		return nil, fmt.Errorf("pod %s: start its box: %w", c.id, err)
	}
	log.Printf("pod %s: box %s running (%d MiB, %d CPUs)", c.id, box.ID(), mem, cpus)
	return &pod{id: c.id, box: box, members: map[string]bool{}}, nil
}

// addToPod gives container c of a running pod its root: a copy of its
// root file system in the box (the box's volumes are fixed at boot).
func (s *service) addToPod(ctx context.Context, p *pod, c *container) error {
	cctx, cancel := context.WithTimeout(ctx, copyTimeout)
	defer cancel()
	err := p.box.CopyIn(cctx, c.rootfs, filepath.Dir(c.boxRoot), boxlite.CopyOptions{Layout: boxlite.LayoutBoxLite})
	if err != nil {
		return fmt.Errorf("container %s: copy its root into pod %s: %w", c.id, p.id, err)
	}
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
