package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// seqLines is what `seq 1 n` prints.
func seqLines(n int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// A detachable execution outlives the runtime (connection) that started it:
// another runtime attaches and reads every byte the first did not, in
// order, and the exit code.
func TestDetachableExecSurvivesItsConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	home := os.Getenv("BOXLITE_TEST_HOME")
	rt1, err := boxlite.NewRuntime(boxlite.WithHome(home))
	if err != nil {
		t.Fatal(err)
	}
	b1, err := boxtest.CreateStarted(ctx, rt1, "alpine:latest", boxlite.WithDetach())
	if err != nil {
		rt1.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Remove(context.Background(), b1.ID(), true) })
	const n = 200000 // 1.3 MB: five windows
	want := append(seqLines(n), "end\n"...)
	x, err := b1.Exec(ctx, boxlite.Command{Argv: []string{"sh", "-c", "seq 1 " + strconv.Itoa(n) + "; echo end; exit 3"}, Detachable: true})
	if err != nil {
		rt1.Close()
		t.Fatal(err)
	}
	first := make([]byte, 300<<10) // more than a window
	if _, err := io.ReadFull(x.Stdout, first); err != nil {
		rt1.Close()
		t.Fatal(err)
	}
	id := x.ID()
	rt1.Close() // the connection ends; the box and the process go on

	rt2, err := boxlite.NewRuntime(boxlite.WithHome(home))
	if err != nil {
		t.Fatal(err)
	}
	defer rt2.Close()
	b2, err := rt2.Get(ctx, b1.ID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b2.AttachExec(ctx, "no-such-exec"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("attach unknown: %v, want ErrNotFound", err)
	}
	x2, err := b2.AttachExec(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b2.AttachExec(ctx, id); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("second attach: %v, want ErrAlreadyExists", err)
	}
	rest, err := io.ReadAll(x2.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	st, err := x2.Wait(ctx)
	if err != nil || st.Code != 3 {
		t.Fatalf("exit %+v, %v; want code 3", st, err)
	}
	got := append(first, rest...)
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("got %d bytes, want %d; they differ from byte %d (read %d before the reconnect)", len(got), len(want), i, len(first))
	}
	// It ended attached: it is forgotten.
	if _, err := b2.AttachExec(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("attach after the exit: %v, want ErrNotFound", err)
	}
}

// With nobody attached, a detachable process is held back: the box keeps a
// window of its output and then stops reading, so the process blocks (its
// progress, read from a file in the box, stops). An attach then gets all
// of it, stdin and signals work.
func TestDetachedExecBackpressure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const lines, width = 5000, 1000 // 5 MB
	script := fmt.Sprintf(`pad=$(printf '%%0%dd' 0); i=0; while [ $i -lt %d ]; do i=$((i+1)); echo "$i $pad"; echo $i > /tmp/progress; done; read x; echo "stdin $x" >&2; exit 4`, width, lines)
	x, err := shared.Exec(ctx, boxlite.Command{Argv: []string{"sh", "-c", script}, Detachable: true, Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	id := x.ID()
	x.Close() // detach at once: nothing read
	progress := func() int {
		res := runIn(t, shared, boxlite.Command{Argv: []string{"cat", "/tmp/progress"}})
		v, _ := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
		return v
	}
	last, same := -1, 0
	for same < 3 { // the same count three times, half a second apart
		p := progress()
		if p == last && p > 0 {
			same++
		} else {
			same = 0
		}
		last = p
		if ctx.Err() != nil {
			t.Fatalf("progress never settled (last %d)", last)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// At most the kept window and a pipe's worth (and a line) got out.
	if held := last * (width + 6); last >= lines || held > 2*protocol.InitialWindow+2*(width+6) {
		t.Fatalf("process got %d lines (%d bytes) out with nobody attached; want at most two windows (%d)", last, held, 2*protocol.InitialWindow)
	}
	t.Logf("held back after %d lines (%d KiB) with nobody attached", last, last*(width+6)>>10)
	x2, err := shared.AttachExec(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if x2.Stdin == nil {
		t.Fatal("attached execution has no stdin; the process was started with it")
	}
	errc := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(x2.Stderr); errc <- b }()
	sc := bufio.NewScanner(x2.Stdout)
	sc.Buffer(make([]byte, 4096), 4096)
	next := 1
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || f[0] != strconv.Itoa(next) || len(f[1]) != width {
			t.Fatalf("line %d: %.40q", next, sc.Text())
		}
		if next++; next > lines {
			break
		}
	}
	if next != lines+1 {
		t.Fatalf("got %d lines, want %d (%v)", next-1, lines, sc.Err())
	}
	if _, err := io.WriteString(x2.Stdin, "hello\n"); err != nil {
		t.Fatal(err)
	}
	st, err := x2.Wait(ctx)
	if err != nil || st.Code != 4 {
		t.Fatalf("exit %+v, %v; want code 4", st, err)
	}
	if e := <-errc; string(e) != "stdin hello\n" {
		t.Fatalf("stderr %q", e)
	}
	// A killed detachable process: Kill works on an attached execution.
	y, err := shared.Exec(ctx, boxlite.Command{Argv: []string{"sleep", "600"}, Detachable: true})
	if err != nil {
		t.Fatal(err)
	}
	y.Close()
	y2, err := shared.AttachExec(ctx, y.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := y2.Kill(); err != nil {
		t.Fatal(err)
	}
	if st, _ := y2.Wait(ctx); st.Signal != 9 {
		t.Fatalf("killed: %+v", st)
	}
}

// A box keeps the exits of detachable executions that ended with nobody
// attached, at most protocol.MaxDetachedExits of them: of one more, one
// is forgotten (ErrNotFound) and every other attach gets its output and
// exit code.
func TestDetachedExitsAreBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	runIn(t, shared, boxlite.Command{Argv: []string{"sh", "-c", "rm -rf /tmp/ends; mkdir /tmp/ends"}})
	n := protocol.MaxDetachedExits + 1
	ids := make([]string, n)
	for i := range n {
		x, err := shared.Exec(ctx, boxlite.Command{Argv: []string{"sh", "-c", fmt.Sprintf("sleep 1; echo out %d; touch /tmp/ends/%d; exit %d", i, i, i%100)}, Detachable: true})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = x.ID()
		x.Close() // detached before it ends: the agent serves the exec before this cancel
	}
	for {
		res := runIn(t, shared, boxlite.Command{Argv: []string{"sh", "-c", "ls /tmp/ends | wc -l"}})
		if strings.TrimSpace(string(res.Stdout)) == strconv.Itoa(n) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the executions did not end: %s", res.Stdout)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // the agent sees the outputs end just after the files
	forgotten := 0
	for i, id := range ids {
		x, err := shared.AttachExec(ctx, id)
		if errors.Is(err, errdefs.ErrNotFound) {
			forgotten++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(x.Stdout)
		st, err := x.Wait(ctx)
		if err != nil || st.Code != i%100 || string(out) != fmt.Sprintf("out %d\n", i) {
			t.Fatalf("exec %d: exit %+v, %v, output %q", i, st, err, out)
		}
	}
	if forgotten != 1 {
		t.Fatalf("%d of %d ended executions forgotten, want 1 (the box keeps %d)", forgotten, n, protocol.MaxDetachedExits)
	}
}

// A detachable exec that ends at once still reports its pid in the box:
// the agent reaps no child while a spawn reads the pid of its own (before,
// about 2 in 300 under load came back as pid 0).
func TestQuickDetachableExecHasAPid(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i := range 100 {
		x, err := shared.Exec(ctx, boxlite.Command{Argv: []string{"true"}, Detachable: true})
		if err != nil {
			t.Fatal(err)
		}
		if st, err := x.Wait(ctx); err != nil || st.Code != 0 {
			t.Fatalf("exec %d: %+v %v", i, st, err)
		}
		if x.Pid() <= 0 {
			t.Fatalf("exec %d ended with pid %d", i, x.Pid())
		}
	}
}
