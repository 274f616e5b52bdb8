package hv

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/boxlite/boxlite/errdefs"
)

// StopPIT stops channel 0 of the VM's PIT (i8254) under TCG, as Linux 6.10
// does itself for a PIT it does not use ("x86/i8253: Disable PIT timer 0
// when not in use"; the box's 6.1 kernel does not). QEMU resets the PIT
// into mode 3 with the longest count, and a PIT nobody programs toggles its
// (masked) output every 27 ms forever: QEMU's main loop woke 36 times a
// second in an idle box for it. The guest's ticks come from its local APIC
// timer (the CPU has ARAT, so it needs no broadcast timer either); call
// this once its kernel is up (the agent said hello). Mode 0 with a count of
// 0 fires once, 55 ms later, and never again; the kernel's i8253 driver
// programs the channel anew should it ever use it. The writes go through
// the monitor's I/O port command (HMP "o"), as the guest's own outb would:
// the PIT stays, since machines without one (pit=off) hung at boot.
// Under KVM (an in-kernel PIT) it does nothing.
func (vm *VM) StopPIT() error {
	if vm.accel != TCG {
		return nil
	}
	for _, w := range []string{"o /b 0x43 0x30", "o /b 0x40 0", "o /b 0x40 0"} {
		ret, err := vm.command("human-monitor-command", map[string]any{"command-line": w}, nil)
		if err != nil {
			return err
		}
		var out string
		json.Unmarshal(ret, &out)
		if strings.TrimSpace(out) != "" { // HMP says nothing when the write went through
			return fmt.Errorf("hv: stop the PIT: %q: %s: %w", w, strings.TrimSpace(out), errdefs.ErrInternal)
		}
	}
	return nil
}
