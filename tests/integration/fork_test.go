package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// shellLine types cmd into a shell execution, which must print a line
// starting with tok, and returns that line (output before it, replayed on
// an attach, is skipped).
func shellLine(t *testing.T, e *boxlite.Execution, r *bufio.Reader, tok, cmd string) string {
	t.Helper()
	if _, err := io.WriteString(e.Stdin, cmd+"\n"); err != nil {
		t.Fatalf("write %q: %v", cmd, err)
	}
	got := make(chan string, 1)
	go func() {
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				got <- "error: " + err.Error()
				return
			}
			if strings.HasPrefix(line, tok) {
				got <- strings.TrimSpace(line)
				return
			}
		}
	}()
	select {
	case s := <-got:
		return s
	case <-time.After(time.Minute):
		t.Fatalf("no line %s... within a minute after %q", tok, cmd)
		return ""
	}
}

// Fork(3) of a running box: each fork has the source's shell (a detachable
// exec) with its variable, a change in one is seen in no other nor in the
// source; the forks and the source differ in hostname and randomness; the
// source ran on; a file written before the fork is in each fork's disk.
// The source read its boot id before the fork (the kernel makes it once),
// yet each fork reads one of its own.
func TestFork(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	src, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithName("fork-src"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Remove(context.Background(), src.ID(), true) })
	runIn(t, src, sh("echo on-disk > /root/f; sync; cat /proc/sys/kernel/random/boot_id"))
	shell, err := src.Exec(ctx, boxlite.Command{Argv: []string{"sh"}, Stdin: true, Detachable: true})
	if err != nil {
		t.Fatal(err)
	}
	srcOut := bufio.NewReader(shell.Stdout)
	if got := shellLine(t, shell, srcOut, "t0=", "x=42; echo t0=$x"); got != "t0=42" {
		t.Fatalf("source shell: %q", got)
	}

	forks, err := src.Fork(ctx, 3, []string{"fork-a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range forks {
		t.Cleanup(func() { f.Remove(context.Background(), true) })
	}
	if len(forks) != 3 || forks[0].Name() != "fork-a" {
		t.Fatalf("forks: %d, first named %q", len(forks), forks[0].Name())
	}
	if s := src.State(); s != boxlite.StateRunning {
		t.Fatalf("source after the fork: %s", s)
	}
	// The source's shell ran on, its stream intact.
	if got := shellLine(t, shell, srcOut, "t1=", "echo t1=$x"); got != "t1=42" {
		t.Fatalf("source shell after the fork: %q", got)
	}
	shells := make([]*boxlite.Execution, len(forks))
	outs := make([]*bufio.Reader, len(forks))
	for i, f := range forks {
		if f.State() != boxlite.StateRunning {
			t.Fatalf("fork %d is %s", i, f.State())
		}
		if shells[i], err = f.AttachExec(ctx, shell.ID()); err != nil {
			t.Fatalf("fork %d: attach the shell: %v", i, err)
		}
		outs[i] = bufio.NewReader(shells[i].Stdout)
		if got := shellLine(t, shells[i], outs[i], "t2=", "echo t2=$x"); got != "t2=42" {
			t.Fatalf("fork %d shell: %q", i, got)
		}
		if got := string(runIn(t, f, sh("cat /root/f")).Stdout); got != "on-disk\n" {
			t.Fatalf("fork %d disk: %q", i, got)
		}
	}
	if got := shellLine(t, shells[0], outs[0], "t3=", "x=43; echo t3=$x"); got != "t3=43" {
		t.Fatalf("fork 0 shell: %q", got)
	}
	for i := 1; i < len(forks); i++ {
		if got := shellLine(t, shells[i], outs[i], "t4=", "echo t4=$x"); got != "t4=42" {
			t.Fatalf("fork %d saw fork 0's change: %q", i, got)
		}
	}
	if got := shellLine(t, shell, srcOut, "t5=", "echo t5=$x"); got != "t5=42" {
		t.Fatalf("the source saw fork 0's change: %q", got)
	}
	// Each a machine of its own.
	seen := map[string]string{}
	for i, b := range append([]*boxlite.Box{src}, forks...) {
		out := strings.Fields(string(runIn(t, b, sh("hostname; head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'; echo; cat /proc/sys/kernel/random/uuid /proc/sys/kernel/random/boot_id")).Stdout))
		if len(out) != 4 {
			t.Fatalf("box %d said %q", i, out)
		}
		for j, what := range []string{"hostname", "random bytes", "uuid", "boot id"} {
			if prev, dup := seen[out[j]]; dup {
				t.Errorf("two boxes read the same %s %q (%s)", what, out[j], prev)
			}
			seen[out[j]] = fmt.Sprintf("%s of box %d", what, i)
		}
	}
	if forks[0].Info().Config.Hostname != "fork-a" {
		t.Errorf("fork-a's hostname: %q", forks[0].Info().Config.Hostname)
	}
	for _, e := range append(shells, shell) {
		e.Stdin.Close()
	}
}

// The CLI forks a running box: two forks named as asked, each with the
// source's /tmp and a hostname of its own.
func TestCLIFork(t *testing.T) {
	id := strings.TrimSpace(mustCLI(t, "create", "alpine:latest"))
	t.Cleanup(func() { cli(t, "rm", "-f", id) })
	mustCLI(t, "exec", id, "sh", "-c", "echo kept > /tmp/k")
	ids := strings.Fields(mustCLI(t, "fork", "-n", "2", "--name", "cli-fork-a", id))
	for _, f := range ids {
		t.Cleanup(func() { cli(t, "rm", "-f", f) })
	}
	if len(ids) != 2 {
		t.Fatalf("fork printed %q, want 2 ids", ids)
	}
	hosts := map[string]bool{}
	for i, f := range append([]string{id}, ids...) {
		out := strings.Fields(mustCLI(t, "exec", f, "sh", "-c", "cat /tmp/k; hostname"))
		if len(out) != 2 || out[0] != "kept" || hosts[out[1]] {
			t.Fatalf("box %d (%s) printed %q (hostnames so far %v)", i, f, out, hosts)
		}
		hosts[out[1]] = true
	}
	if !hosts["cli-fork-a"] {
		t.Fatalf("no fork named cli-fork-a: hostnames %v", hosts)
	}
	if _, errOut, code := cli(t, "fork", "-n", "0", id); code == 0 {
		t.Fatalf("fork -n 0: exit 0 (%s)", errOut)
	}
}
