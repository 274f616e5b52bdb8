package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/shimapi"
)

// An exec's bulk stdout crosses the box's lane once it is
// throughput-bound (protocol.FeatureExecLane), when no copy holds it.
func TestExecLane(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	t.Run("Bytes", func(t *testing.T) {
		// 64 MiB of random bytes, byte-exact, through the lane (its host
		// disk use seen while the output is read; empty after).
		res := runIn(t, shared, sh("dd if=/dev/urandom of=/root/el.bin bs=1M count=64 2>/dev/null && sha256sum /root/el.bin"))
		want := strings.Fields(string(res.Stdout))[0]
		t.Cleanup(func() { runIn(t, shared, sh("rm -f /root/el.bin")) })
		e, err := shared.Exec(ctx, sh("cat /root/el.bin"))
		must(t, err)
		h := sha256.New()
		laneMax := int64(0)
		start := time.Now()
		n, err := io.Copy(h, sampleLane(t, e.Stdout, &laneMax))
		must(t, err)
		st, err := e.Wait(ctx)
		must(t, err)
		t.Logf("64 MiB of stdout: %v", time.Since(start))
		if got := hex.EncodeToString(h.Sum(nil)); st.Code != 0 || n != 64<<20 || got != want {
			t.Fatalf("stdout: %d bytes, sha256 %s, exit %d; want %d bytes, sha256 %s", n, got, st.Code, 64<<20, want)
		}
		checkLane(t, shared, "exec stdout", laneMax, true)
	})

	t.Run("Order", func(t *testing.T) {
		// Stderr and stdout lines written in turn arrive in turn, before
		// and after stdout takes the lane.
		script := "dd if=/dev/zero bs=64k count=64 2>/dev/null; for i in 1 2 3 4; do echo e$i >&2; sleep 0.3; " +
			"dd if=/dev/zero bs=64k count=40 2>/dev/null; echo o$i; sleep 0.3; done"
		e, err := shared.Exec(ctx, sh(script))
		must(t, err)
		var mu sync.Mutex
		var events []string
		laneMax := int64(0)
		var wg sync.WaitGroup
		var outBytes int
		read := func(r io.Reader, fd string) { // lines, the zeros left out
			defer wg.Done()
			buf := make([]byte, 64<<10)
			line := ""
			for {
				k, err := r.Read(buf)
				if fd == "out" {
					outBytes += k
				}
				for _, c := range buf[:k] {
					switch {
					case c == '\n':
						mu.Lock()
						events = append(events, fd+":"+line)
						mu.Unlock()
						line = ""
					case c != 0:
						line += string(c)
					}
				}
				if err != nil {
					return
				}
			}
		}
		wg.Add(2)
		go read(sampleLane(t, e.Stdout, &laneMax), "out")
		go read(e.Stderr, "err")
		wg.Wait()
		_, err = e.Wait(ctx)
		must(t, err)
		want := "err:e1 out:o1 err:e2 out:o2 err:e3 out:o3 err:e4 out:o4"
		if got := strings.Join(events, " "); got != want {
			t.Fatalf("arrival order: %s\nwant %s", got, want)
		}
		if want := 64<<16 + 4*(40<<16+3); outBytes != want { // spliced, then read after the first line
			t.Fatalf("stdout: %d bytes, want %d", outBytes, want)
		}
		checkLane(t, shared, "exec stdout and stderr", laneMax, true)
	})

	t.Run("CopyBeside", func(t *testing.T) {
		// While an exec holds the lane, a copy takes the channel; the
		// lane is free once the exec ends.
		e, err := shared.Exec(ctx, sh("dd if=/dev/zero bs=64k count=64 2>/dev/null; sleep 5; dd if=/dev/zero bs=64k count=64 2>/dev/null"))
		must(t, err)
		done := make(chan int64, 1)
		go func() { n, _ := io.Copy(io.Discard, e.Stdout); done <- n }()
		for start := time.Now(); laneBytes(t, shared) == 0; time.Sleep(20 * time.Millisecond) {
			if time.Since(start) > time.Minute {
				t.Fatal("the exec never took the lane")
			}
		}
		lane, err := os.OpenFile(filepath.Join(shared.Info().Dir, shimapi.LaneFile), os.O_RDWR, 0)
		must(t, err)
		defer lane.Close()
		if err := unix.Flock(int(lane.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
			t.Fatal("the lane is free while the exec uses it")
		}
		data := []byte(strings.Repeat("beside the exec\n", 1<<16))
		src := filepath.Join(t.TempDir(), "beside.txt")
		must(t, os.WriteFile(src, data, 0o600))
		must(t, shared.CopyIn(ctx, src, "/root/beside.txt", boxlite.CopyOptions{}))
		out := filepath.Join(t.TempDir(), "back.txt")
		must(t, shared.CopyOut(ctx, "/root/beside.txt", out, boxlite.CopyOptions{}))
		if got, _ := os.ReadFile(out); string(got) != string(data) {
			t.Fatalf("copy beside the exec: %d bytes back of %d", len(got), len(data))
		}
		select {
		case <-done:
			t.Fatal("the exec ended before the copies did: they may have had the lane")
		default:
		}
		if n := <-done; n != 8<<20 {
			t.Fatalf("exec stdout: %d bytes, want %d", n, 8<<20)
		}
		_, err = e.Wait(ctx)
		must(t, err)
		must(t, unix.Flock(int(lane.Fd()), unix.LOCK_EX|unix.LOCK_NB)) // given back
		must(t, unix.Flock(int(lane.Fd()), unix.LOCK_UN))
		laneRoundTrip(ctx, t, shared)
		runIn(t, shared, sh("rm -f /root/beside.txt"))
	})

	t.Run("OutputLimit", func(t *testing.T) {
		cmd := sh("dd if=/dev/zero bs=64k count=256 2>/dev/null; echo done >&2")
		cmd.OutputLimit = 3<<20 + 5
		res, err := shared.Run(ctx, cmd)
		must(t, err)
		if len(res.Stdout) != 3<<20+5 || !res.StdoutTruncated || string(res.Stderr) != "done\n" || res.Code != 0 {
			t.Fatalf("limited run: %d bytes of stdout (truncated %v), stderr %q, exit %d", len(res.Stdout), res.StdoutTruncated, res.Stderr, res.Code)
		}
		if n := laneBytes(t, shared); n != 0 {
			t.Fatalf("the lane holds %d bytes after the exec", n)
		}
	})
}

// sampleLane wraps an exec's stdout, noting the most host disk shared's
// lane used while it was read.
func sampleLane(t *testing.T, r io.Reader, most *int64) io.Reader {
	return readerFunc(func(p []byte) (int, error) {
		n, err := r.Read(p)
		*most = max(*most, laneBytes(t, shared))
		return n, err
	})
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// checkExecLaneHostile runs, on a box of the fake agent's "copy"
// scenario, execs whose stdout lane chunks break the rules: each exec
// fails with the reason, and the box lives on.
func checkExecLaneHostile(ctx context.Context, t *testing.T, b *boxlite.Box) {
	for _, c := range []struct{ argv0, want string }{
		{"lane-outside", "lane chunk of 4096 bytes at offset 67108864"},
		{"lane-skip", "lane chunk of 10 bytes at offset 2097152: want 1 to 1048576 bytes at 0"},
	} {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := b.Run(cctx, boxlite.Command{Argv: []string{c.argv0}})
		cancel()
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("exec %s: %v; want ErrInvalidArgument naming %q", c.argv0, err, c.want)
		}
		t.Log(err)
		// The lane stays held a while (the agent may still be moving a
		// chunk), then is given back empty.
		laneFreeWithin(t, b, 15*time.Second)
		if n := laneBytes(t, b); n != 0 {
			t.Fatalf("exec %s: the lane holds %d bytes after it", c.argv0, n)
		}
	}
}

// laneFreeWithin waits until no one holds b's lane.
func laneFreeWithin(t *testing.T, b *boxlite.Box, d time.Duration) {
	t.Helper()
	lane, err := os.OpenFile(filepath.Join(b.Info().Dir, shimapi.LaneFile), os.O_RDWR, 0)
	must(t, err)
	defer lane.Close()
	for start := time.Now(); unix.Flock(int(lane.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil; time.Sleep(50 * time.Millisecond) {
		if time.Since(start) > d {
			t.Fatalf("the lane is still held after %v", d)
		}
	}
	must(t, unix.Flock(int(lane.Fd()), unix.LOCK_UN))
}

// fakeExecLane plays a compromised agent's exec (the fake QEMU's "copy"
// scenario): it asks for the lane at once and, granted it, announces the
// chunk its name says.
func fakeExecLane(w *protocol.Writer, f protocol.Frame) {
	send := func(t protocol.Type, body any) {
		if fr, err := protocol.Encode(t, f.Stream, body); err == nil {
			_ = w.WriteFrame(fr)
		}
	}
	switch f.Type {
	case protocol.TExec:
		var req protocol.Exec
		_ = protocol.Decode(f, &req)
		fakeCopy.execs[f.Stream] = req.Argv[0]
		send(protocol.TStarted, protocol.Started{Pid: 2})
		if !req.Lane {
			send(protocol.TError, protocol.ErrorOf(fmt.Errorf("no lane asked")))
			return
		}
		_ = w.WriteFrame(protocol.Frame{Type: protocol.TLaneAsk, Stream: f.Stream})
	case protocol.TLaneGrant:
		var g protocol.LaneGrant
		_ = protocol.Decode(f, &g)
		if g.Slots == 0 {
			send(protocol.TError, protocol.ErrorOf(fmt.Errorf("lane refused")))
			return
		}
		fakeCopy.lane.WriteAt(make([]byte, 4<<20), 0)
		switch fakeCopy.execs[f.Stream] {
		case "lane-outside":
			send(protocol.TLane, protocol.LaneChunk{Off: shimapi.LaneSize, Len: 4096})
		case "lane-skip":
			send(protocol.TLane, protocol.LaneChunk{Off: 2 * protocol.LaneSlot, Len: 10})
		}
	}
}
