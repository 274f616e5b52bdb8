package protocol

import "github.com/boxlite/boxlite/errdefs"

// HandOver is THandOver's body: what the box's new owner asked for.
type HandOver struct {
	Hostname   string `msgpack:"hostname"` // as Identity.Hostname
	AutoRemove bool   `msgpack:"auto_remove"`
	// AutoPauseNs: the box pauses itself after this long idle; 0: never.
	AutoPauseNs int64 `msgpack:"auto_pause_ns,omitempty"`
}

// Check validates a hand-over request from a client.
func (h HandOver) Check() error {
	if !ValidHostname(h.Hostname) {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "hand over: hostname %q: want 1 to 64 of [A-Za-z0-9-], not starting or ending with -", h.Hostname)
	}
	if h.AutoPauseNs < 0 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "hand over: auto-pause %d ns is negative", h.AutoPauseNs)
	}
	return nil
}
