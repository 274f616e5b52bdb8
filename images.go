package boxlite

import (
	"github.com/boxlite/boxlite/internal/image"
	"github.com/boxlite/boxlite/internal/protocol"
)

// The image store's types, as the runtime hands them out (Runtime.Images,
// Runtime.Pull, Runtime.PruneImages).
type (
	// ImageStore is the runtime's content-addressed image store: Load
	// imports a docker archive or OCI layout, List, Get, Tag, Remove, GC.
	ImageStore = image.Store
	// Image is a stored image: its canonical name, digest, config and layers.
	Image = image.Image
	// PullOption adjusts one pull (WithPullProgress).
	PullOption = image.PullOption
	// PullResult is what a pull fetched.
	PullResult = image.PullResult
	// PullProgress is one progress event of a pull.
	PullProgress = image.Progress
	// GCResult is what PruneImages removed.
	GCResult = image.GCResult
)

// WithPullProgress calls f with the pull's progress events.
func WithPullProgress(f func(PullProgress)) PullOption { return image.WithProgress(f) }

// NetworkStats are a running box's network counters (Box.NetworkStats).
type NetworkStats = protocol.NetworkStats
