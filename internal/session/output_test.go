package session

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// A shell command printing more than the limit keeps the limit's worth,
// says so, and the session goes on (markers after the flood are found).
func TestShellSessionOutputLimit(t *testing.T) {
	s, err := NewShell(context.Background(), localStarter(t), Options{Grace: 500 * time.Millisecond, OutputLimit: 1 << 20}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := s.Exec(context.Background(), []string{"sh", "-c", "head -c 5000000 /dev/zero; head -c 3000000 /dev/zero >&2; echo tail"}, nil, 30*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Stdout) != 1<<20 || !r.StdoutTruncated || len(r.Stderr) != 1<<20 || !r.StderrTruncated {
		t.Fatalf("stdout %d truncated=%v, stderr %d truncated=%v", len(r.Stdout), r.StdoutTruncated, len(r.Stderr), r.StderrTruncated)
	}
	if r := shExec(t, s, "echo", "next"); string(r.Stdout) != "next\n" || r.StdoutTruncated {
		t.Fatalf("next command: %q truncated=%v", r.Stdout, r.StdoutTruncated)
	}
}

func TestSessionCellOutputLimit(t *testing.T) {
	s := newTestSession(t, Options{OutputLimit: 1 << 20})
	r := run(t, s, "import sys\nsys.stdout.write('x' * 3000000)\nsys.stdout.flush()\nprint('err', file=sys.stderr)")
	if len(r.Stdout) != 1<<20 || !r.StdoutTruncated || r.StderrTruncated || !bytes.Equal(r.Stderr, []byte("err\n")) {
		t.Fatalf("stdout %d truncated=%v, stderr %q truncated=%v", len(r.Stdout), r.StdoutTruncated, r.Stderr, r.StderrTruncated)
	}
	if r := run(t, s, "print(1)"); string(r.Stdout) != "1\n" || r.StdoutTruncated {
		t.Fatalf("next cell: %+v", r)
	}
}
