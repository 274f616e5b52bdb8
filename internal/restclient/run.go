package restclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/boxlite/boxlite"

	"github.com/boxlite/boxlite/internal/capbuf"
)

// Collect reads all output (each stream up to the execution's limit) and
// waits.
func (e *Execution) Collect(ctx context.Context) (*boxlite.ExecResult, error) {
	var st boxlite.ExitStatus
	var err error
	out, errb := capbuf.Collect(e.Stdout, e.Stderr, e.limit, func() {
		if st, err = e.Wait(ctx); ctx.Err() != nil {
			e.Close()
		}
	})
	return &boxlite.ExecResult{ExitStatus: st, Stdout: out.Bytes(), Stderr: errb.Bytes(),
		StdoutTruncated: out.Truncated(), StderrTruncated: errb.Truncated()}, err
}

// Run executes cmd and collects its output.
func (b *Box) Run(ctx context.Context, cmd boxlite.Command) (*boxlite.ExecResult, error) {
	e, err := b.Exec(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return e.Collect(ctx)
}

// shortID is the execution's ID from the server's "exec-<hex>" id; another
// server's id that is not so gets a random one.
func shortID(xid string) string {
	h := strings.TrimPrefix(xid, "exec-")
	if len(h) >= 12 && strings.Trim(h[:12], "0123456789abcdef") == "" {
		return h[:12]
	}
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = fmt.Sprintf("%q", a)
	}
	return "[" + strings.Join(q, " ") + "]"
}
