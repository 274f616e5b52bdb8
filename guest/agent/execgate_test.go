//go:build linux

package agent

import (
	"errors"
	"testing"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

func TestCheckLimits(t *testing.T) {
	ok := protocol.Exec{Groups: []uint32{1, 2}, Rlimits: []protocol.Rlimit{
		{Type: "RLIMIT_NOFILE", Soft: 10, Hard: 20}, {Type: "RLIMIT_CORE", Soft: 0, Hard: 1<<64 - 1}}}
	if err := checkLimits(&ok); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		req  protocol.Exec
		kind error
	}{
		{protocol.Exec{Rlimits: []protocol.Rlimit{{Type: "RLIMIT_FOO"}}}, errdefs.ErrInvalidArgument},
		{protocol.Exec{Rlimits: []protocol.Rlimit{{Type: "RLIMIT_NOFILE", Soft: 2, Hard: 1}}}, errdefs.ErrInvalidArgument},
		{protocol.Exec{Rlimits: []protocol.Rlimit{{Type: "RLIMIT_NOFILE"}, {Type: "RLIMIT_NOFILE"}}}, errdefs.ErrInvalidArgument},
		{protocol.Exec{Rlimits: make([]protocol.Rlimit, protocol.MaxRlimits+1)}, errdefs.ErrLimit},
		{protocol.Exec{Groups: make([]uint32, protocol.MaxGroups+1)}, errdefs.ErrLimit},
		{protocol.Exec{Groups: []uint32{1<<32 - 1}}, errdefs.ErrInvalidArgument},
	} {
		if err := checkLimits(&c.req); !errors.Is(err, c.kind) {
			t.Errorf("%+v: %v, want %v", c.req.Rlimits, err, c.kind)
		}
	}
	if len(rlimitTypes) != protocol.MaxRlimits {
		t.Errorf("%d rlimit types, protocol.MaxRlimits %d", len(rlimitTypes), protocol.MaxRlimits)
	}
}
