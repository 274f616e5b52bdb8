package integration

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// The guest is hostile: its kernel and root may be the attacker's, so the
// agent's end of the channel may send anything. These tests put a
// misbehaving agent behind the real shim and core: the test binary itself
// stands in for QEMU (BOXLITE_FAKE_AGENT selects the misbehaviour), answers
// QMP and speaks the agent protocol on the channel QEMU would have given the
// guest. It runs in the VMM's jail like QEMU would, so the misbehaviour is
// named by its file name (fake-qemu-SCENARIO): the jail passes no
// environment. Each case must end the box with a typed error naming the violation,
// with bounded memory, and leave the process and other boxes working.

const fakeQEMUPrefix = "fake-qemu-"

// fakeQEMUScenario is the misbehaviour this process plays, or "".
func fakeQEMUScenario() string {
	s, _ := strings.CutPrefix(filepath.Base(os.Args[0]), fakeQEMUPrefix)
	if s == filepath.Base(os.Args[0]) {
		return ""
	}
	return s
}

func TestHostileAgent(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		cmd     boxlite.Command
		want    string // in the error
		noBoot  bool   // the box must fail to boot
		timeout bool   // the error is ErrTimeout rather than a stopped box
		late    bool   // the command itself completes; the box is stopped after it
	}{
		{name: "window-overrun", cmd: sh("cat"), want: "overruns its window"},
		{name: "credit-overflow", cmd: boxlite.Command{Argv: []string{"cat"}, Stdin: true}, want: "credit of 4611686018427387904 bytes"},
		{name: "bad-header", cmd: sh("true"), want: "claims 4294967295 bytes"},
		{name: "stream0-flood", cmd: sh("true"), want: "frames on streams that are not open"},
		{name: "frames-after-exit", cmd: sh("true"), want: "frames on streams that are not open", late: true},
		{name: "second-started", cmd: sh("true"), want: "second started frame"},
		{name: "garbage-exit", cmd: sh("true"), want: "stream"},
		{name: "no-exit", cmd: boxlite.Command{Argv: []string{"sleep", "1000"}, Timeout: time.Second, Grace: time.Second}, want: "did not report", timeout: true},
		{name: "bad-hello", noBoot: true, want: "agent speaks version 99"},
	}
	bin := t.TempDir()
	before := vmRSSKiB(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fake := filepath.Join(bin, fakeQEMUPrefix+c.name)
			if err := os.Link(exe, fake); err != nil {
				t.Fatal(err)
			}
			rt, err := boxlite.NewRuntime(boxlite.WithHome(t.TempDir()), boxlite.WithQEMU(fake))
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			loadTestImage(t, rt)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			b, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithBootTimeout(10*time.Second))
			if c.noBoot {
				if !errors.Is(err, errdefs.ErrBootFailed) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("create: %v; want a boot failure naming %q", err, c.want)
				}
				if m := rt.Metrics(); m != (boxlite.RuntimeMetrics{BoxesCreatedTotal: 1, BoxesFailedTotal: 1}) {
					t.Fatalf("runtime metrics after a failed create: %+v", m)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = b.Run(ctx, c.cmd)
			for c.late && err == nil && time.Since(start) < 20*time.Second {
				time.Sleep(50 * time.Millisecond)
				_, err = b.Run(ctx, sh("true"))
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("run: %v; want an error naming %q", err, c.want)
			}
			kind := errdefs.ErrInvalidState
			if c.timeout {
				kind = errdefs.ErrTimeout
			}
			if !errors.Is(err, kind) {
				t.Fatalf("run: %v; want kind %v", err, kind)
			}
			t.Logf("%s after %v: %v", c.name, time.Since(start).Round(time.Millisecond), err)
			if c.timeout {
				return
			}
			// The box is stopped, and says why, to every later call.
			if _, err := b.Run(ctx, sh("true")); !errors.Is(err, errdefs.ErrInvalidState) || !strings.Contains(err.Error(), "protocol violation") && !strings.Contains(err.Error(), "agent channel failed") {
				t.Fatalf("next run: %v; want box stopped by the violation", err)
			}
			// An auto-remove box (the default) is removed by its creator
			// once its run has ended, whatever ended it.
			if s := b.State(); s != boxlite.StateRemoved {
				t.Fatalf("auto-remove box after the violation: %s; want removed", s)
			}
			if _, err := os.Stat(b.Info().Dir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("its directory after the removal: %v", err)
			}
			if err := b.Remove(ctx, false); err != nil {
				t.Fatalf("remove of the auto-removed box: %v", err)
			}
		})
	}
	if grew := vmRSSKiB(t) - before; grew > 300<<10 {
		t.Errorf("host RSS grew by %d MiB", grew>>10)
	}
	// A real box in the same process still works.
	if res := runIn(t, shared, sh("echo alive")); string(res.Stdout) != "alive\n" {
		t.Fatalf("shared box after the hostile agents: %q", res.Stdout)
	}
}

func loadTestImage(t *testing.T, rt *boxlite.Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := rt.Images().Load(ctx, os.Getenv("BOXLITE_TEST_IMAGE")); err != nil {
		t.Fatal(err)
	}
}

func vmRSSKiB(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// fakeQEMU is the test binary standing in for QEMU: it answers QMP on fd 3
// and plays a misbehaving agent on the agent chardev. It never returns.
func fakeQEMU(scenario string) {
	fail := func(err error) { fmt.Fprintln(os.Stderr, "fake qemu:", err); os.Exit(1) }
	qmp := os.NewFile(3, "qmp")
	go func() {
		r := bufio.NewReader(qmp)
		fmt.Fprintln(qmp, `{"QMP": {"version": {}, "capabilities": []}}`)
		for {
			if _, err := r.ReadString('\n'); err != nil {
				os.Exit(0)
			}
			fmt.Fprintln(qmp, `{"return": {}}`)
		}
	}()
	var ch net.Conn
	var err error
	for i, a := range os.Args {
		if i == 0 || os.Args[i-1] != "-chardev" || !strings.Contains(a, "id=agent") {
			continue
		}
		for _, opt := range strings.Split(a, ",") {
			if p, ok := strings.CutPrefix(opt, "path="); ok {
				ch, err = net.Dial("unix", p)
			} else if fd, ok := strings.CutPrefix(opt, "fd="); ok {
				n, _ := strconv.Atoi(fd)
				ch, err = net.FileConn(os.NewFile(uintptr(n), "agent"))
			}
		}
	}
	if ch == nil || err != nil {
		fail(fmt.Errorf("no agent chardev in %q: %v", os.Args, err))
	}
	w := protocol.NewWriter(ch)
	send := func(t protocol.Type, stream uint32, body any) {
		f, err := protocol.Encode(t, stream, body)
		if err == nil {
			err = w.WriteFrame(f)
		}
		if err != nil {
			os.Exit(0) // the shim hung up: the test is over for this VM
		}
	}
	hello := protocol.Hello{Version: protocol.Version, Agent: "fake", Features: []string{protocol.FeatureTTY}}
	if scenario == "bad-hello" {
		hello.Version = 99
	}
	if scenario == "copy" {
		hello.Features = append(hello.Features, protocol.FeatureCopy)
		if fakeCopy.lane = fakeLane(os.Args); fakeCopy.lane != nil {
			hello.Features = append(hello.Features, protocol.FeatureLane, protocol.FeatureExecLane)
		}
	}
	if strings.HasPrefix(scenario, "tunnel-") {
		hello.Features = append(hello.Features, protocol.FeatureTunnel)
	}
	send(protocol.THello, 0, hello)
	r := protocol.NewReader(ch)
	for {
		f, err := r.ReadFrame()
		if err != nil || f.Type == protocol.TShutdown {
			os.Exit(0)
		}
		if scenario == "copy" {
			fakeCopyFrame(w, f)
			continue
		}
		if strings.HasPrefix(scenario, "tunnel-") {
			fakeTunnel(w, scenario, f) // tunnel_test.go
			continue
		}
		if f.Type != protocol.TExec {
			continue
		}
		id := f.Stream
		switch scenario {
		case "window-overrun":
			send(protocol.TStarted, id, protocol.Started{Pid: 2})
			// More than the window in one frame, before any credit (frame
			// by frame, a fast host could credit each in time).
			w.WriteFrame(protocol.Frame{Type: protocol.TStdout, Stream: id, Payload: make([]byte, 5*protocol.MaxChunk)})
		case "credit-overflow":
			send(protocol.TStarted, id, protocol.Started{Pid: 2})
			send(protocol.TCredit, id, protocol.Credit{Fd: 0, Bytes: 1 << 62})
		case "bad-header":
			var hdr [protocol.HeaderSize]byte
			binary.BigEndian.PutUint32(hdr[0:4], 0xffffffff)
			hdr[4] = byte(protocol.TStdout)
			binary.BigEndian.PutUint32(hdr[5:9], id)
			ch.Write(hdr[:])
		case "stream0-flood":
			for i := 0; i < 100000; i++ {
				w.WriteFrame(protocol.Frame{Type: protocol.TStdout, Stream: 0, Payload: []byte("x")})
			}
		case "frames-after-exit":
			send(protocol.TStarted, id, protocol.Started{Pid: 2})
			send(protocol.TExit, id, protocol.Exit{})
			for i := 0; i < 100000; i++ {
				w.WriteFrame(protocol.Frame{Type: protocol.TStdout, Stream: id, Payload: []byte("x")})
			}
		case "second-started":
			send(protocol.TStarted, id, protocol.Started{Pid: 2})
			send(protocol.TStarted, id, protocol.Started{Pid: 3})
		case "garbage-exit":
			w.WriteFrame(protocol.Frame{Type: protocol.TExit, Stream: id, Payload: []byte{0xc1, 0xff}})
		case "no-exit":
			send(protocol.TStarted, id, protocol.Started{Pid: 2})
		}
	}
}
