package errdefs

import (
	"errors"
	"fmt"

	"github.com/boxlite/boxlite/internal/safetext"
)

// Kinds. Wrap them with context: fmt.Errorf("exec: box %q is stopped: %w", id, ErrInvalidState).
var (
	ErrInvalidArgument = errors.New("invalid argument")
	ErrNotFound        = errors.New("not found")
	ErrAlreadyExists   = errors.New("already exists")
	ErrInvalidState    = errors.New("invalid state")
	ErrTimeout         = errors.New("timeout")
	ErrUnsupported     = errors.New("unsupported")
	ErrBootFailed      = errors.New("boot failed")
	ErrClosed          = errors.New("closed")
	ErrLimit           = errors.New("limit exceeded")
	ErrUnreachable     = errors.New("unreachable") // a registry or other remote did not answer
	ErrInternal        = errors.New("internal error")
)

// Kind is the stable, wire-safe name of an error kind. It is what crosses the
// guest protocol and becomes C status codes, Python classes and JS error.code.
type Kind string

const (
	KindInvalidArgument Kind = "invalid_argument"
	KindNotFound        Kind = "not_found"
	KindAlreadyExists   Kind = "already_exists"
	KindInvalidState    Kind = "invalid_state"
	KindTimeout         Kind = "timeout"
	KindUnsupported     Kind = "unsupported"
	KindBootFailed      Kind = "boot_failed"
	KindClosed          Kind = "closed"
	KindLimit           Kind = "limit"
	KindUnreachable     Kind = "unreachable"
	KindInternal        Kind = "internal"
)

// KindOf returns the kind of err, or KindInternal when err carries none.
func KindOf(err error) Kind {
	for _, k := range Kinds {
		if errors.Is(err, k.Err) {
			return k.Kind
		}
	}
	return KindInternal
}

// New rebuilds an error received from across an edge (a guest agent's
// error, a shim's boot error quoting the guest console): it keeps the
// message as sent, its control characters taken out (safetext.Text: the
// other side may be hostile, and the message ends up on terminals), and
// wraps the sentinel of kind, so errors.Is works on this side.
func New(kind Kind, msg string) error {
	msg = safetext.Text(msg)
	if k, ok := Lookup(kind); ok {
		return &remote{msg: msg, kind: k.Err}
	}
	return &remote{msg: msg, kind: ErrInternal}
}

type remote struct {
	msg  string
	kind error
}

func (e *remote) Error() string { return e.msg }
func (e *remote) Unwrap() error { return e.kind }

// Errorf formats a message and wraps kind: Errorf(ErrNotFound, "image %q", ref)
// reads "image \"x\": not found".
func Errorf(kind error, format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), kind)
}
