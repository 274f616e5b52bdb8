package protocol

import (
	"errors"
	"strings"
	"testing"

	"github.com/boxlite/boxlite/errdefs"
)

func TestCapMask(t *testing.T) {
	m, err := CapMask(DefaultCaps, []string{"net_admin", "CAP_SYS_PTRACE", " MKNOD "}, []string{"chown", "MKNOD"})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultCaps | 1<<12 | 1<<19
	want &^= 1 << 0
	if m != want {
		t.Errorf("mask %#x, want %#x", m, want)
	}
	if m, _ := CapMask(DefaultCaps, []string{"ALL"}, nil); m != AllCaps {
		t.Errorf("add ALL: %#x", m)
	}
	if m, _ := CapMask(DefaultCaps, []string{"NET_ADMIN"}, []string{"all"}); m != 0 {
		t.Errorf("drop ALL: %#x", m)
	}
	for _, bad := range []string{"NET_ADMN", "", "CAP_", "41"} {
		_, err := CapMask(DefaultCaps, []string{bad}, nil)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if got := strings.Join(CapNames(DefaultCaps), ","); got != "CHOWN,DAC_OVERRIDE,FOWNER,FSETID,KILL,SETGID,SETUID,SETPCAP,NET_BIND_SERVICE,NET_RAW,SYS_CHROOT,AUDIT_WRITE,SETFCAP" {
		t.Errorf("default names %s", got)
	}
	if (SandboxPolicy{Caps: AllCaps + 1}).Check() == nil {
		t.Error("bits past the last capability passed")
	}
}
