package shim

import (
	"strings"
	"testing"

	"github.com/boxlite/boxlite/internal/protocol"
)

func frame(t *testing.T, typ protocol.Type, body any) protocol.Frame {
	t.Helper()
	f, err := protocol.Encode(typ, 1, body)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestCopyStreamsObeyTheWindow(t *testing.T) {
	chunk := protocol.Frame{Type: protocol.TStdout, Stream: 1, Payload: make([]byte, protocol.MaxChunk)}
	out := &flow{kind: protocol.TCopyOut}
	// An honest copy out: a window's worth, credit, more, done.
	for i := 0; i < protocol.InitialWindow/protocol.MaxChunk; i++ {
		if err := out.fromAgent(chunk); err != nil {
			t.Fatal(err)
		}
	}
	out.fromClient(frame(t, protocol.TCredit, protocol.Credit{Fd: 1, Bytes: protocol.InitialWindow}))
	if err := out.fromAgent(chunk); err != nil {
		t.Fatal(err)
	}
	if err := out.fromAgent(frame(t, protocol.TCopyDone, protocol.CopyDone{Entries: 1})); err != nil {
		t.Fatal(err)
	}
	// Past the window.
	over := &flow{kind: protocol.TCopyOut}
	var err error
	for i := 0; err == nil && i < 10; i++ {
		err = over.fromAgent(chunk)
	}
	if err == nil || !strings.Contains(err.Error(), "overruns its window") {
		t.Fatalf("overrun: %v", err)
	}
	// Frames a copy never has.
	for _, f := range []protocol.Frame{
		frame(t, protocol.TStarted, protocol.Started{}),
		frame(t, protocol.TExit, protocol.Exit{}),
		{Type: protocol.TStderr, Stream: 1, Payload: []byte("x")},
		frame(t, protocol.TCredit, protocol.Credit{Fd: 0, Bytes: 1}),
	} {
		if err := (&flow{kind: protocol.TCopyOut}).fromAgent(f); err == nil {
			t.Errorf("copy out accepted %s", f.Type)
		}
	}
	if err := (&flow{kind: protocol.TCopyIn}).fromAgent(chunk); err == nil {
		t.Error("copy in accepted data from the agent")
	}
	if err := (&flow{}).fromAgent(frame(t, protocol.TCopyDone, protocol.CopyDone{})); err == nil {
		t.Error("exec accepted copy-done")
	}
	// Copy in: credit only for what the client sent.
	in := &flow{kind: protocol.TCopyIn}
	in.fromClient(protocol.Frame{Type: protocol.TStdin, Stream: 1, Payload: make([]byte, 100)})
	if err := in.fromAgent(frame(t, protocol.TCredit, protocol.Credit{Fd: 0, Bytes: 100})); err != nil {
		t.Fatal(err)
	}
	if err := in.fromAgent(frame(t, protocol.TCredit, protocol.Credit{Fd: 0, Bytes: 1})); err == nil {
		t.Error("forged copy-in credit accepted")
	}
}

// TestFlowCounts: the shim counts an exec the agent refuses before it
// starts as an error, one that started and failed later as none, and the
// bytes of exec streams only.
func TestFlowCounts(t *testing.T) {
	s := &shim{}
	refused, ran, copyIn := s.newFlow(protocol.TExec), s.newFlow(protocol.TExec), s.newFlow(protocol.TCopyIn)
	errFrame := frame(t, protocol.TError, protocol.Error{Kind: "not_found", Message: "no such binary"})
	if err := refused.fromAgent(errFrame); err != nil {
		t.Fatal(err)
	}
	ran.fromClient(protocol.Frame{Type: protocol.TStdin, Payload: []byte("abcd")})
	copyIn.fromClient(protocol.Frame{Type: protocol.TStdin, Payload: make([]byte, 100)})
	for _, f := range []protocol.Frame{frame(t, protocol.TStarted, protocol.Started{Pid: 7}),
		{Type: protocol.TStdout, Payload: []byte("out")}, {Type: protocol.TStderr, Payload: []byte("e")}, errFrame} {
		if err := ran.fromAgent(f); err != nil {
			t.Fatal(err)
		}
	}
	s.counters.refused(protocol.TExec)
	s.counters.refused(protocol.TCopyOut)
	c := &s.counters
	if got := [4]uint64{c.execs.Load(), c.execErrors.Load(), c.stdin.Load(), c.output.Load()}; got != [4]uint64{3, 2, 4, 4} {
		t.Errorf("execs, errors, stdin, output = %v, want [3 2 4 4]", got)
	}
}

// TestLaneObeysItsSlots: a copy's lane chunks are held to the slots the
// client asked for, and its frees to the chunks it sent.
func TestLaneObeysItsSlots(t *testing.T) {
	out := &flow{kind: protocol.TCopyOut}
	out.fromClient(frame(t, protocol.TCopyOut, protocol.CopyOut{Src: "/x", Lane: 2}))
	chunk := frame(t, protocol.TLane, protocol.LaneChunk{Off: 0, Len: 1})
	for i := 0; i < 2; i++ {
		if err := out.fromAgent(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := out.fromAgent(chunk); err == nil || !strings.Contains(err.Error(), "lane chunk overruns its window") {
		t.Fatalf("third chunk in a lane of 2: %v", err)
	}
	out.fromClient(frame(t, protocol.TLaneFree, protocol.LaneFree{Slots: 2}))
	if err := out.fromAgent(chunk); err != nil {
		t.Fatalf("after a free: %v", err)
	}
	if err := (&flow{kind: protocol.TCopyOut}).fromAgent(chunk); err == nil {
		t.Error("a copy out without the lane accepted a lane chunk")
	}
	if err := out.fromAgent(protocol.Frame{Type: protocol.TStdout, Stream: 1, Payload: []byte("x")}); err == nil || !strings.Contains(err.Error(), "takes the lane") {
		t.Errorf("a data frame on a lane copy out: %v", err)
	}

	in := &flow{kind: protocol.TCopyIn}
	in.fromClient(frame(t, protocol.TCopyIn, protocol.CopyIn{Dest: "/x", Lane: 4}))
	in.fromClient(frame(t, protocol.TLane, protocol.LaneChunk{Off: 0, Len: 1}))
	free := func(n int) error { return in.fromAgent(frame(t, protocol.TLaneFree, protocol.LaneFree{Slots: n})) }
	if err := free(2); err == nil {
		t.Error("freed 2 slots of 1 chunk sent")
	}
	if err := free(1); err != nil {
		t.Fatal(err)
	}
	if err := free(0); err == nil {
		t.Error("freed 0 slots")
	}
	if err := in.fromAgent(chunk); err == nil {
		t.Error("a copy in accepted a lane chunk from the agent")
	}
}

// TestExecLaneObeysItsGrant: an exec asks for the lane once, and its
// stdout's lane chunks are held to the slots the client granted.
func TestExecLaneObeysItsGrant(t *testing.T) {
	s := &shim{}
	e := s.newFlow(protocol.TExec)
	chunk := frame(t, protocol.TLane, protocol.LaneChunk{Off: 0, Len: 10})
	if err := e.fromAgent(chunk); err == nil {
		t.Fatal("a lane chunk before any grant was accepted")
	}
	e = s.newFlow(protocol.TExec)
	ask := protocol.Frame{Type: protocol.TLaneAsk, Stream: 1}
	if err := e.fromAgent(ask); err != nil {
		t.Fatal(err)
	}
	if err := e.fromAgent(ask); err == nil {
		t.Fatal("a second lane-ask was accepted")
	}
	e.fromClient(frame(t, protocol.TLaneGrant, protocol.LaneGrant{Slots: 1}))
	if err := e.fromAgent(chunk); err != nil {
		t.Fatal(err)
	}
	e.fromClient(frame(t, protocol.TLaneFree, protocol.LaneFree{Slots: 1}))
	if err := e.fromAgent(chunk); err != nil {
		t.Fatalf("after a free: %v", err)
	}
	if err := e.fromAgent(chunk); err == nil || !strings.Contains(err.Error(), "exec lane chunk overruns") {
		t.Fatalf("a second chunk in one slot: %v", err)
	}
	if got := s.counters.output.Load(); got != 20 {
		t.Errorf("output counted %d bytes, want 20", got)
	}
}

// TestTunnelStreamsObeyTheRules: a tunnel's data comes after its started
// frame, within the window and before its eof; credit covers only what the
// client sent; an exec's frames are not a tunnel's.
func TestTunnelStreamsObeyTheRules(t *testing.T) {
	chunk := protocol.Frame{Type: protocol.TStdout, Stream: 1, Payload: make([]byte, protocol.MaxChunk)}
	honest := &flow{kind: protocol.TTunnel}
	steps := []protocol.Frame{frame(t, protocol.TStarted, protocol.Started{})}
	for i := 0; i < protocol.InitialWindow/protocol.MaxChunk; i++ {
		steps = append(steps, chunk)
	}
	for _, f := range steps {
		if err := honest.fromAgent(f); err != nil {
			t.Fatal(err)
		}
	}
	honest.fromClient(frame(t, protocol.TCredit, protocol.Credit{Fd: 1, Bytes: protocol.InitialWindow}))
	honest.fromClient(protocol.Frame{Type: protocol.TStdin, Stream: 1, Payload: make([]byte, 10)})
	for _, f := range []protocol.Frame{chunk, frame(t, protocol.TCredit, protocol.Credit{Fd: 0, Bytes: 10}),
		{Type: protocol.TEOF, Stream: 1}, frame(t, protocol.TExit, protocol.Exit{})} {
		if err := honest.fromAgent(f); err != nil {
			t.Fatalf("%s: %v", f.Type, err)
		}
	}
	bad := map[string][]protocol.Frame{
		"overruns its window":      append(append([]protocol.Frame{}, steps...), chunk),
		"before its started":       {chunk},
		"after its eof":            {steps[0], {Type: protocol.TEOF, Stream: 1}, chunk},
		"a second one":             {steps[0], {Type: protocol.TEOF, Stream: 1}, {Type: protocol.TEOF, Stream: 1}},
		"bytes of stdin were sent": {steps[0], frame(t, protocol.TCredit, protocol.Credit{Fd: 0, Bytes: 1})},
		"unexpected stderr":        {steps[0], {Type: protocol.TStderr, Stream: 1, Payload: []byte("x")}},
		"unexpected copy-done":     {steps[0], frame(t, protocol.TCopyDone, protocol.CopyDone{})},
	}
	for want, frames := range bad {
		fl := &flow{kind: protocol.TTunnel}
		var err error
		for _, f := range frames {
			if err = fl.fromAgent(f); err != nil {
				break
			}
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
	if err := (&flow{kind: protocol.TExec}).fromAgent(protocol.Frame{Type: protocol.TEOF, Stream: 1}); err == nil {
		t.Error("exec accepted eof")
	}
}

// A watch's events are a copy out's data: within the window, no other
// frames but its end.
func TestWatchStreamsObeyTheWindow(t *testing.T) {
	chunk := protocol.Frame{Type: protocol.TStdout, Stream: 1, Payload: make([]byte, protocol.MaxChunk)}
	w := &flow{kind: protocol.TWatch}
	for i := 0; i < protocol.InitialWindow/protocol.MaxChunk; i++ {
		if err := w.fromAgent(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.fromAgent(chunk); err == nil || !strings.Contains(err.Error(), "overruns its window") {
		t.Fatalf("overrun: %v", err)
	}
	w.fromClient(frame(t, protocol.TCredit, protocol.Credit{Fd: 1, Bytes: protocol.InitialWindow}))
	if err := w.fromAgent(chunk); err != nil {
		t.Fatal(err)
	}
	for _, f := range []protocol.Frame{
		frame(t, protocol.TStarted, protocol.Started{}),
		{Type: protocol.TStderr, Stream: 1, Payload: []byte("x")},
		frame(t, protocol.TLane, protocol.LaneChunk{Len: 1}),
	} {
		if err := (&flow{kind: protocol.TWatch}).fromAgent(f); err == nil {
			t.Errorf("watch accepted %s", f.Type)
		}
	}
	if err := (&flow{kind: protocol.TWatch}).fromAgent(frame(t, protocol.TCopyDone, protocol.CopyDone{})); err != nil {
		t.Error(err)
	}
}

// A root's usage is one small data frame, then its end.
func TestRootUsageStreamsAreSmall(t *testing.T) {
	u := frame(t, protocol.TStdout, protocol.RootUsage{Pids: 3, RSS: 1 << 40})
	fl := &flow{kind: protocol.TRootUsage}
	if err := fl.fromAgent(u); err != nil {
		t.Fatal(err)
	}
	big := protocol.Frame{Type: protocol.TStdout, Stream: 1, Payload: make([]byte, protocol.MaxRootUsageFrame)}
	if err := fl.fromAgent(big); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("a second, large answer: %v", err)
	}
	for _, f := range []protocol.Frame{
		frame(t, protocol.TStarted, protocol.Started{}),
		{Type: protocol.TStderr, Stream: 1, Payload: []byte("x")},
	} {
		if err := (&flow{kind: protocol.TRootUsage}).fromAgent(f); err == nil {
			t.Errorf("root usage accepted %s", f.Type)
		}
	}
	if err := fl.fromAgent(frame(t, protocol.TCopyDone, protocol.CopyDone{})); err != nil {
		t.Error(err)
	}
}

// A root's cgroup limits answer only their end; its OOM watch sends data
// within the window, as a watch does.
func TestRootCgroupStreams(t *testing.T) {
	data := protocol.Frame{Type: protocol.TStdout, Stream: 1, Payload: make([]byte, protocol.RootOOMRecord)}
	if err := (&flow{kind: protocol.TRootCgroup}).fromAgent(data); err == nil {
		t.Error("root cgroup accepted a data frame")
	}
	if err := (&flow{kind: protocol.TRootCgroup}).fromAgent(frame(t, protocol.TCopyDone, protocol.CopyDone{})); err != nil {
		t.Error(err)
	}
	fl := &flow{kind: protocol.TRootOOM}
	if err := fl.fromAgent(data); err != nil {
		t.Fatal(err)
	}
	over := protocol.Frame{Type: protocol.TStdout, Stream: 1, Payload: make([]byte, protocol.InitialWindow)}
	if err := fl.fromAgent(over); err == nil || !strings.Contains(err.Error(), "window") {
		t.Fatalf("an OOM watch past its window: %v", err)
	}
	if err := (&flow{kind: protocol.TRootOOM}).fromAgent(frame(t, protocol.TStarted, protocol.Started{})); err == nil {
		t.Error("root OOM watch accepted started")
	}
}
