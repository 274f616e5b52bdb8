package shim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/hv"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/shimapi"
	"github.com/boxlite/boxlite/internal/sparse"
	"github.com/boxlite/boxlite/internal/template"
)

// saveTimeout bounds saving a template VM (about 10 ms of device state,
// then a copy of the memory it touched).
const saveTimeout = 60 * time.Second

// noRetry marks a start that failed in a way a boot would fail too: in
// the guest (an agent error, no hello within the budget), or the box's
// network stack.
type noRetry struct{ error }

func (e noRetry) Unwrap() error { return e.error }

// startVM brings the box's VM up and returns the agent's hello, the reader
// of its channel and how it started (protocol.Start*): from the template of
// its shape when the runtime asked for one (making it first if there is
// none), else, or if that fails for any reason but the guest's, by booting.
// Either way the box then gets its own identity (protocol.Identity).
func (s *shim) startVM(vmcfg hv.Config, start time.Time) (protocol.Hello, *protocol.Reader, string, error) {
	if s.cfg.Resume {
		h, r, err := s.resumeVM(vmcfg, start)
		return h, r, protocol.StartResume, err
	}
	if s.cfg.Templates != "" {
		h, r, how, err := s.warmStart(vmcfg, start)
		if err == nil {
			return h, r, how, nil
		}
		var nr noRetry
		if errors.As(err, &nr) {
			return h, nil, "", err
		}
		s.startNote = "template: " + err.Error()
		log.Printf("%s; booting instead", s.startNote)
		start = time.Now()
	}
	h, r, err := s.coldBoot(vmcfg, start)
	return h, r, protocol.StartBoot, err
}

// bootFailed is a boot's error: what failed, with the console's last lines.
func (s *shim) bootFailed(vm *hv.VM, console, what string, start time.Time, err error) error {
	vm.Kill()
	return fmt.Errorf("boot: %s after %.1fs: %v: %w\n--- console (last lines) ---\n%s",
		what, time.Since(start).Seconds(), err, errdefs.ErrBootFailed, shimapi.ConsoleTail(console, 2048))
}

func (s *shim) coldBoot(vmcfg hv.Config, start time.Time) (protocol.Hello, *protocol.Reader, error) {
	var err error
	s.vm, err = hv.Start(vmcfg)
	s.closeFSConns() // QEMU has its own
	if err != nil {
		s.stopVolumes()
		return protocol.Hello{}, nil, err
	}
	s.watchVolumes()
	if err := s.serveNetwork(); err != nil {
		s.stopVolumes()
		return protocol.Hello{}, nil, s.bootFailed(s.vm, vmcfg.ConsoleLog, "network", start, err)
	}
	s.agent = s.vm.Channel() // reads EOF if the VMM exits
	s.w = protocol.NewWriter(s.agent)
	r := protocol.NewReader(s.agent)
	h, err := s.readHello(s.vm, r, vmcfg.ConsoleLog, start)
	if err == nil {
		s.stopPIT(s.vm)
		err = s.identify(s.vm, r, h, start)
		if err != nil {
			err = s.bootFailed(s.vm, vmcfg.ConsoleLog, "identity", start, err)
		}
	}
	if err != nil {
		s.stopVolumes()
		return h, nil, err
	}
	return h, r, nil
}

// stopPIT stops the VM's unused PIT once its kernel is up (hv.StopPIT); a
// failure only costs an idle box more wake-ups, so it is logged.
func (s *shim) stopPIT(vm *hv.VM) {
	if err := vm.StopPIT(); err != nil {
		log.Printf("%v (an idle box wakes its VMM 36 times a second)", err)
	}
}

// readHello reads and checks the agent's hello (a noRetry error if
// there is none).
func (s *shim) readHello(vm *hv.VM, r *protocol.Reader, console string, start time.Time) (protocol.Hello, error) {
	var h protocol.Hello
	fail := func(what string, err error) (protocol.Hello, error) {
		return h, noRetry{s.bootFailed(vm, console, what, start, err)}
	}
	f, err := s.awaitFrame(vm, r, start)
	if err != nil {
		if exitedSoon(vm) {
			err = fmt.Errorf("VMM exited: %v", vm.Err())
		}
		return fail("no hello from the guest agent", err)
	}
	if f.Type == protocol.TError {
		var e protocol.Error
		protocol.Decode(f, &e)
		return fail("guest agent failed", e.Err())
	}
	if f.Type != protocol.THello {
		return fail("guest agent protocol", fmt.Errorf("first frame is %s, not hello", f.Type))
	}
	if err := protocol.Decode(f, &h); err != nil {
		return fail("guest agent protocol", err)
	}
	if h.Version != protocol.Version {
		return fail("guest agent protocol", fmt.Errorf("agent speaks version %d, host %d", h.Version, protocol.Version))
	}
	return h, nil
}

// identify gives the box its own identity (protocol.Identity): the host's
// clock, fresh entropy, its hostname. An agent without the feature keeps
// the template's, which is why templates need it.
func (s *shim) identify(vm *hv.VM, r *protocol.Reader, h protocol.Hello, start time.Time) error {
	if !h.Has(protocol.FeatureIdentity) {
		return nil
	}
	id := newIdentity(s.cfg.Hostname, s.cfg.Pool) // a pool box's machine is its owner's (handover.go)
	if s.trustCA != "" {
		if !h.Has(protocol.FeatureTrustCA) {
			return fmt.Errorf("secrets: the guest agent cannot install the box's CA (no %q feature)", protocol.FeatureTrustCA)
		}
		id.TrustCA = s.trustCA
	}
	if p := s.cfg.Sandbox; p != nil {
		if !h.Has(protocol.FeatureSandboxPolicy) {
			return fmt.Errorf("capabilities/seccomp: the guest agent cannot change its sandbox (no %q feature)", protocol.FeatureSandboxPolicy)
		}
		id.Sandbox = p
	}
	f, err := protocol.Encode(protocol.TIdentity, 0, id)
	if err == nil {
		err = s.sendAgent(f)
	}
	if err != nil {
		return err
	}
	if f, err = s.awaitFrame(vm, r, start); err != nil {
		return err
	}
	return identityAnswer(f)
}

// identityAnswer is the agent's answer f to an identity: nil when it took it.
func identityAnswer(f protocol.Frame) error {
	switch f.Type {
	case protocol.TIdentity:
		return nil
	case protocol.TError:
		var e protocol.Error
		protocol.Decode(f, &e)
		return e.Err()
	}
	return fmt.Errorf("guest agent protocol: answer to identity is %s", f.Type)
}

// warmStart starts the box from the template of its shape, making the
// template first if there is none.
func (s *shim) warmStart(vmcfg hv.Config, start time.Time) (protocol.Hello, *protocol.Reader, string, error) {
	exe, _ := os.Executable()
	extra := []string{template.FileIdentity(exe)}
	if len(s.cfg.Park) > 0 {
		b, _ := json.Marshal(s.cfg.Park)
		extra = append(extra, "park="+string(b))
	}
	key, err := template.Key(vmcfg, extra...)
	if err != nil {
		return protocol.Hello{}, nil, "", err
	}
	store := template.Store{Dir: s.cfg.Templates}
	how := protocol.StartTemplate
	t, err := store.Get(key)
	if errors.Is(err, errdefs.ErrNotFound) {
		how = protocol.StartNewTemplate
		// Boxes of a shape started at once wait for the one that makes
		// its template, within the boot's own budget.
		t, err = store.Create(key, s.cfg.BootTimeout, func(dir string) (template.Built, error) { return s.buildTemplate(dir, vmcfg, start) })
	} else if err != nil {
		log.Printf("template %s: %v; removing it", key, err)
		store.Remove(key) // the next box makes a new one
		return protocol.Hello{}, nil, "", err
	}
	if err != nil {
		return protocol.Hello{}, nil, "", err
	}
	h, r, err := s.restore(vmcfg, t, time.Now())
	var nr noRetry
	if err != nil && !errors.As(err, &nr) {
		log.Printf("template %s: restore failed, removing it: %v", key, err)
		store.Remove(key) // the next box makes a new one
	}
	if err != nil {
		return h, nil, "", err
	}
	return h, r, how, nil
}

// buildTemplate boots a template VM of the box's shape on a copy of the
// box's fresh disk, its memory in a shared memfd, and saves it into dir
// once its agent said hello (before it got an identity). The VM then goes.
func (s *shim) buildTemplate(dir string, vmcfg hv.Config, start time.Time) (template.Built, error) {
	tcfg := vmcfg
	tcfg.Disks = append([]hv.Disk(nil), vmcfg.Disks...)
	for i, d := range tcfg.Disks {
		// The lane stays the box's own, empty: the template VM never
		// copies, and is gone before the box's VM opens it.
		if !d.ReadOnly && d.Serial != protocol.LaneSerial {
			if err := sparse.Copy(context.Background(), d.Path, filepath.Join(dir, template.DiskFile)); err != nil {
				return template.Built{}, err
			}
			tcfg.Disks[i].Path = filepath.Join(dir, template.DiskFile)
		}
	}
	ram, err := hv.NewRAM("boxlite-template-vm", vmcfg.MemoryMiB)
	if err != nil {
		return template.Built{}, err
	}
	defer ram.Close()
	tcfg.RAM = &hv.RAM{File: ram, Shared: true}
	tcfg.ConsoleLog = filepath.Join(dir, template.ConsoleFile)
	if vmcfg.Jail != nil {
		j := *vmcfg.Jail
		j.Cgroup += "-template"
		tcfg.Jail = &j
	}
	vm, err := hv.Start(tcfg)
	if err != nil {
		return template.Built{}, err
	}
	defer vm.Kill()
	if n := vm.Network(); n != nil {
		defer n.Close() // the NIC's frames go nowhere: the template has no network stack
	}
	r := protocol.NewReader(vm.Channel())
	h, err := s.readHello(vm, r, tcfg.ConsoleLog, start)
	if err != nil {
		return template.Built{}, err
	}
	if !h.Has(protocol.FeatureIdentity) {
		return template.Built{}, errdefs.Errorf(errdefs.ErrUnsupported, "the agent cannot take an identity (an older agent)")
	}
	bootMs := float64(time.Since(start).Microseconds()) / 1000
	s.stopPIT(vm) // saved so: the boxes restored from it inherit a stopped PIT
	if err := s.park(vm, r, h, start); err != nil {
		return template.Built{}, err
	}
	if err := template.SaveInto(dir, vm, ram, saveTimeout); err != nil {
		return template.Built{}, err
	}
	log.Printf("template saved in %s: boot %.0f ms, saved after %.0f ms", dir, bootMs, float64(time.Since(start).Microseconds())/1000)
	return template.Built{Hello: h, BootMs: bootMs}, nil
}

// park starts the execs the runtime wants a restored box to find started
// (Config.Park) in the template VM, each on a stream of its own, and waits
// until they settle: of each entry's alternatives, the first the agent
// parks. One the agent refuses or that exits (an image without that
// interpreter) is left out with a log line, and the box then starts that
// session itself. An error is the VM's (it died or ran out of budget).
func (s *shim) park(vm *hv.VM, r *protocol.Reader, h protocol.Hello, start time.Time) error {
	if len(s.cfg.Park) == 0 {
		return nil
	}
	if !h.Has(protocol.FeaturePark) {
		log.Printf("template: the agent cannot park processes; the template has none")
		return nil
	}
	w := protocol.NewWriter(vm.Channel())
	id := uint32(0)
	for _, alts := range s.cfg.Park {
		for _, req := range alts {
			t0 := time.Now()
			id++
			f, err := protocol.Encode(protocol.TPark, id, req)
			if err == nil {
				err = w.WriteFrame(f)
			}
			if err == nil {
				f, err = s.awaitFrame(vm, r, start)
			}
			if err != nil {
				return fmt.Errorf("template: park %s: %w", req.Argv[0], err)
			}
			if f.Stream != id || (f.Type != protocol.TParked && f.Type != protocol.TError) {
				return fmt.Errorf("template: guest agent protocol: %s frame on stream %d answers park on stream %d", f.Type, f.Stream, id)
			}
			if f.Type == protocol.TError {
				var e protocol.Error
				protocol.Decode(f, &e)
				log.Printf("template: park %s: %v", req.Argv[0], e.Err())
				continue
			}
			var st protocol.Started
			protocol.Decode(f, &st)
			log.Printf("template: parked %s as pid %d in %.0f ms", req.Argv[0], st.Pid, float64(time.Since(t0).Microseconds())/1000)
			break
		}
	}
	return nil
}

// laps returns a function that records how long each step since start
// took and returns them all so far, for a log line.
func laps(start time.Time) func(step string) string {
	var out string
	last := start
	return func(step string) string {
		now := time.Now()
		out += fmt.Sprintf("%s %.0f ms, ", step, float64(now.Sub(last).Microseconds())/1000)
		last = now
		return out
	}
}

// restore starts the box's VM from t on a copy of the template's disk in
// place of the box's fresh one (put back if the restore fails).
func (s *shim) restore(vmcfg hv.Config, t *template.Template, start time.Time) (protocol.Hello, *protocol.Reader, error) {
	h := t.Hello
	lap := laps(start)
	ram, release, err := t.RAM()
	if err != nil {
		return h, nil, err
	}
	state, err := t.State()
	if err != nil {
		release()
		return h, nil, err
	}
	defer state.Close()
	lap("memory")
	disk := s.cfg.Path(shimapi.DiskFile)
	fresh := disk + ".fresh"
	undo := func() {
		release()
		os.Remove(disk)
		os.Rename(fresh, disk)
	}
	if err := os.Rename(disk, fresh); err != nil {
		release()
		return h, nil, err
	}
	if err := sparse.Copy(context.Background(), filepath.Join(t.Dir, template.DiskFile), disk); err != nil {
		undo()
		return h, nil, err
	}
	lap("disk")
	// The box's log starts with the boot it continues.
	boot := shimapi.ConsoleTail(filepath.Join(t.Dir, template.ConsoleFile), 256<<10)
	os.WriteFile(vmcfg.ConsoleLog, []byte(fmt.Sprintf("boxlite: this box started from template %s; its boot log follows\n%s\nboxlite: restored\n", t.Key, boot)), 0o600)
	vmcfg.RAM = &hv.RAM{File: ram}
	vmcfg.Incoming = state
	if s.vm, err = hv.Start(vmcfg); err != nil {
		undo()
		return h, nil, err
	}
	fail := func(what string, err error) (protocol.Hello, *protocol.Reader, error) {
		s.vm.Kill()
		undo()
		return h, nil, fmt.Errorf("%s: %w", what, err)
	}
	lap("vmm")
	s.agent = s.vm.Channel()
	s.w = protocol.NewWriter(s.agent)
	r := protocol.NewReader(s.agent)
	if err := s.identify(s.vm, r, h, start); err != nil {
		return fail("identity after the restore", err)
	}
	lap("identity")
	// Only now: the network stack takes the box's published ports for
	// good, and a box whose restore failed boots with them.
	if err := s.serveNetwork(); err != nil {
		s.vm.Kill()
		undo()
		return h, nil, noRetry{fmt.Errorf("network: %w", err)}
	}
	log.Printf("restored from template %s: %s", t.Key, strings.TrimSuffix(lap("network"), ", "))
	os.Remove(fresh)
	s.releaseRAM = release
	s.vmcfg.RAM = vmcfg.RAM // a pause's state names its memory backend
	return h, r, nil
}
