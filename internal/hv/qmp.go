package hv

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/boxlite/boxlite/errdefs"
)

// handshake waits for QEMU's QMP greeting and the answer to
// qmp_capabilities. QEMU only answers commands from its main loop, so an
// answer means every -device has been created; the greeting alone comes
// earlier.
func (vm *VM) handshake(timeout time.Duration) (*json.Decoder, error) {
	vm.qmp.SetDeadline(time.Now().Add(timeout))
	defer vm.qmp.SetDeadline(time.Time{})
	dec := json.NewDecoder(vm.qmp)
	var greeting struct {
		QMP json.RawMessage `json:"QMP"`
	}
	if err := dec.Decode(&greeting); err != nil {
		return nil, err
	}
	if greeting.QMP == nil {
		return nil, errors.New("no QMP greeting")
	}
	if _, err := io.WriteString(vm.qmp, `{"execute":"qmp_capabilities"}`+"\n"); err != nil {
		return nil, err
	}
	for {
		var m qmpMessage
		if err := dec.Decode(&m); err != nil {
			return nil, err
		}
		switch {
		case m.Return != nil:
			return dec, nil
		case m.Error != nil:
			return nil, fmt.Errorf("qmp_capabilities: %s", m.Error.Desc)
		case m.Event != "":
			vm.event(m)
		}
	}
}

// startFailed turns a failed handshake into Start's error and makes sure
// QEMU is gone.
func (vm *VM) startFailed(herr error) error {
	var ne net.Error
	if errors.As(herr, &ne) && ne.Timeout() {
		vm.Kill()
		return fmt.Errorf("hv: start: qemu (pid %d) did not come up within %v: %w",
			vm.Pid(), startTimeout, errdefs.ErrTimeout)
	}
	// QEMU closed the monitor: it is exiting. Give it a moment to do so.
	select {
	case <-vm.done:
	case <-time.After(5 * time.Second):
		vm.Kill()
	}
	msg := lastLines(vm.out.String(), 2048)
	if msg == "" {
		msg = "no output"
	}
	status := herr.Error()
	if vm.werr != nil {
		status = vm.werr.Error()
	}
	return fmt.Errorf("hv: start: qemu failed (%s): %s: %w", status, msg, errdefs.ErrBootFailed)
}

type qmpMessage struct {
	ID     json.RawMessage `json:"id"`
	Event  string          `json:"event"`
	Data   json.RawMessage `json:"data"`
	Return json.RawMessage `json:"return"`
	Error  *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error"`
}

// readEvents drains QMP until QEMU goes away, remembering what Err needs.
func (vm *VM) readEvents(dec *json.Decoder) {
	defer close(vm.qmpDone)
	defer vm.qmp.Close()
	for {
		var m qmpMessage
		if err := dec.Decode(&m); err != nil {
			return
		}
		if m.Event != "" {
			vm.event(m)
		} else {
			vm.reply(m)
		}
	}
}

func (vm *VM) event(m qmpMessage) {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	switch m.Event {
	case "GUEST_PANICKED":
		vm.panicked = true
	case "SHUTDOWN":
		var d struct {
			Reason string `json:"reason"`
		}
		if json.Unmarshal(m.Data, &d) == nil && d.Reason != "" {
			vm.shutdown = d.Reason
		}
	case "BLOCK_IO_ERROR":
		var d struct {
			Device  string `json:"device"`
			NoSpace bool   `json:"nospace"`
			Action  string `json:"action"`
		}
		if json.Unmarshal(m.Data, &d) == nil && d.NoSpace && d.Action == "stop" && vm.nospace == "" {
			// Paused for lack of host space: end it (vm.proc.kill, not
			// Kill, which would call it the caller's doing).
			vm.nospace = strings.ToValidUTF8(d.Device[:min(len(d.Device), 64)], "?") // QEMU is confined, not trusted
			go vm.proc.kill()
		}
	}
}
