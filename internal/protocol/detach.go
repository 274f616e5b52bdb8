package protocol

import (
	"time"

	"github.com/boxlite/boxlite/errdefs"
)

// A detachable exec (Exec.Detach, FeatureExecDetach) keeps running when its
// stream is cancelled: the host's connection went (the shim cancels a
// client's streams when it leaves) or the host let go of it. The agent then
// keeps, per output fd, the bytes it sent that the host had not credited
// (at most InitialWindow: what the window allowed out) and goes on reading
// the process's pipes only while that buffer has room, as if the absent
// host were a reader that never credits: a process with nobody attached
// blocks on its writes, the guest holds at most a window per fd.
//
// TAttach resumes the exec on a new stream: Started, the retained bytes
// (again counted against the new stream's window, which starts full), then
// live output and Exit, stdin, signals and resizes as on any exec stream.
// Stdin the old host sent that the process had not taken is dropped with
// it. One stream holds an exec at a time.
//
// A detachable exec that ends while nobody is attached keeps its exit
// status and retained output for DetachedExitKeep, and the agent keeps at
// most MaxDetachedExits of them (the oldest go first); then a TAttach for
// it is ErrNotFound. Once its Exit went out on an attached stream it is
// forgotten.
const (
	// MaxDetachID bounds Exec.Detach and Attach.ID.
	MaxDetachID = 64
	// DetachedExitKeep is how long the agent keeps a finished detached
	// exec's exit status.
	DetachedExitKeep = 10 * time.Minute
	// MaxDetachedExits is how many finished detached execs the agent keeps.
	MaxDetachedExits = 64
	// MaxDetachedExecs caps the detachable execs an agent holds at once,
	// running or finished, attached or not (each may hold two windows of
	// output).
	MaxDetachedExecs = 256
)

// Attach asks to resume the detachable exec ID on the stream it arrives on.
type Attach struct {
	ID string `msgpack:"id"`
	// Live: only an exec that still runs. One that ended while detached is
	// then forgotten and the attach is refused as if it never ran (a named
	// session taking over its process starts a new one instead).
	Live bool `msgpack:"live,omitempty"`
}

// ValidDetachID reports whether s may name a detachable exec: 1 to
// MaxDetachID bytes of [A-Za-z0-9_-].
func ValidDetachID(s string) bool {
	if len(s) == 0 || len(s) > MaxDetachID {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// CheckDetachID reports a bad detachable exec id as ErrInvalidArgument.
func CheckDetachID(what, s string) error {
	if !ValidDetachID(s) {
		if len(s) > MaxDetachID {
			s = s[:MaxDetachID] + "..."
		}
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: exec id %q: want 1 to %d of [A-Za-z0-9_-]", what, s, MaxDetachID)
	}
	return nil
}
