package core

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/boxlite/boxlite/errdefs"
)

// A shell session is one long-lived sh fed commands on its stdin. After each
// command the shell prints a marker line, "TOKEN SEQ STATUS" on stdout and
// "TOKEN SEQ" on stderr, where TOKEN is random per session and never sent to
// a command (it travels only on the shell's stdin, which commands do not
// read: they get /dev/null): what precedes the markers is the command's
// output, even without a trailing newline.

// specialBuiltins are the POSIX special built-ins: a failing one (a syntax
// error in eval, export of a bad name) would end a non-interactive shell,
// so they run behind `command`, which keeps their effect on the shell.
var specialBuiltins = map[string]bool{
	"break": true, ":": true, "continue": true, ".": true, "eval": true, "exec": true, "exit": true,
	"export": true, "readonly": true, "return": true, "set": true, "shift": true, "times": true,
	"trap": true, "unset": true,
}

var shellName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// shQuote quotes s as one word for sh.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ShellSession is a live shell in a box: the working directory, exported and
// shell variables and functions set by one Exec are there for the next.
// Commands run one at a time; a ShellSession is safe for concurrent use.
type ShellSession struct {
	start procStarter
	opts  SessionOptions
	grace time.Duration

	busy chan struct{}

	mu        sync.Mutex
	proc      *shProc
	closed    bool
	launches  int
	seq       int
	interrupt chan struct{} // closed by Interrupt; replaced per command
}

// maxShellCommand bounds the script one Exec sends (as the exec protocol
// bounds an argv).
const maxShellCommand = 1 << 20

// Interrupt stops the command running now as its timeout would (SIGINT,
// then the shell is killed after the grace period); a no-op when idle.
func (s *ShellSession) Interrupt() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.interrupt != nil {
		select {
		case <-s.interrupt:
		default:
			close(s.interrupt)
		}
	}
}

// NewShellSession starts a shell (SessionOptions.Shell, default /bin/sh) in
// the box.
func (b *Box) NewShellSession(ctx context.Context, opts SessionOptions) (*ShellSession, error) {
	return newShellSession(ctx, b.sessionStarter(), b.sessionDefaults(opts))
}

func newShellSession(ctx context.Context, start procStarter, opts SessionOptions) (*ShellSession, error) {
	if err := opts.check("shell session"); err != nil {
		return nil, err
	}
	s := &ShellSession{start: start, opts: opts, grace: opts.grace(), busy: make(chan struct{}, 1)}
	s.busy <- struct{}{}
	defer func() { <-s.busy }()
	if _, err := s.ensure(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Pid is the shell's process id in the box (0 while none runs).
func (s *ShellSession) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.pid
}

// Restarts counts the shells started after the first.
func (s *ShellSession) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.launches-1, 0)
}

// Exec runs argv in the session's shell, each argument quoted as one word
// (never joined into a script), and returns its exit code and output. The
// command may be a builtin (cd, export, eval "SCRIPT" for shell code) or a
// function defined earlier; its stdin is /dev/null. env applies to this
// command only: it then runs in a subshell, so its own changes to the shell
// do not stay. A timeout (0: none) sends SIGINT to the command and returns
// ErrTimeout, the shell keeping its state; a command still running after
// the grace period is killed with the shell, which is started again (the
// error wraps ErrSessionRestarted). If the command ends the shell (exit,
// exec), the result is the shell's exit and the next Exec gets a new shell.
func (s *ShellSession) Exec(ctx context.Context, argv []string, env map[string]string, timeout time.Duration) (*ExecResult, error) {
	return s.ExecLimit(ctx, argv, env, timeout, 0)
}

// ExecLimit is Exec keeping at most limit bytes of each stream (0: the
// session's SessionOptions.OutputLimit).
func (s *ShellSession) ExecLimit(ctx context.Context, argv []string, env map[string]string, timeout time.Duration, limit int64) (*ExecResult, error) {
	if limit < 0 {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "shell session: negative output limit %d", limit)
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "shell session: empty command")
	}
	if timeout < 0 {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "shell session: negative timeout")
	}
	for _, a := range argv {
		if strings.ContainsRune(a, 0) {
			return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "shell session: argument %q contains a NUL byte", a)
		}
	}
	words := make([]string, 0, len(argv)+1)
	if specialBuiltins[argv[0]] {
		words = append(words, "command")
	}
	for _, a := range argv {
		words = append(words, shQuote(a))
	}
	line := strings.Join(words, " ")
	if len(env) > 0 {
		keys := make([]string, 0, len(env))
		for k, v := range env {
			if !shellName.MatchString(k) {
				return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "shell session: env key %q is not a shell variable name", k)
			}
			if strings.ContainsRune(v, 0) {
				return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "shell session: env %s contains a NUL byte", k)
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		exports := make([]string, len(keys))
		for i, k := range keys {
			exports[i] = shQuote(k + "=" + env[k])
		}
		line = "( export " + strings.Join(exports, " ") + " && " + line + " )"
	}
	if len(line) > maxShellCommand {
		return nil, errdefs.Errorf(errdefs.ErrLimit, "shell session: command of %d bytes exceeds %d", len(line), maxShellCommand)
	}

	select {
	case s.busy <- struct{}{}:
	case <-ctx.Done():
		return nil, errdefs.Errorf(errdefs.ErrTimeout, "shell session: waiting for the command before: %v", ctx.Err())
	}
	defer func() { <-s.busy }()
	p, err := s.ensure(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.seq++
	seq := s.seq
	interrupt := make(chan struct{})
	s.interrupt = interrupt
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.interrupt = nil
		s.mu.Unlock()
	}()
	script := fmt.Sprintf("%s </dev/null\nprintf '%%s %%d %%d\\n' %s %d $?\nprintf '%%s %%d\\n' %s %d >&2\n", line, p.token, seq, p.token, seq)

	type marker struct {
		out       []byte
		fields    []string
		truncated bool
		err       error
	}
	outCh, errCh := make(chan marker, 1), make(chan marker, 1)
	go func() { o, f, t, err := p.out.next(seq, limit); outCh <- marker{o, f, t, err} }()
	go func() { o, f, t, err := p.err.next(seq, limit); errCh <- marker{o, f, t, err} }()
	if _, err := io.WriteString(p.p.stdin(), script); err != nil {
		p.p.kill()
	}

	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	var grace <-chan time.Time
	done := ctx.Done()
	why := ""
	interrupted, killed := false, false
	var om, em marker
	gotOut, gotErr := false, false
	for !gotOut || !gotErr {
		select {
		case om = <-outCh:
			gotOut = true
		case em = <-errCh:
			gotErr = true
		case <-timer:
			timer, why = nil, fmt.Sprintf("timed out after %s", timeout)
		case <-done:
			done, why = nil, "was cancelled"
		case <-interrupt:
			interrupt, why = nil, "was interrupted"
		case <-grace:
			grace, killed = nil, true
			p.p.kill()
		}
		if why != "" && !interrupted {
			interrupted = true
			if err := p.p.signalGroup(syscall.SIGINT); err != nil {
				killed = true
				p.p.kill()
			} else {
				g := time.NewTimer(s.grace)
				defer g.Stop()
				grace = g.C
			}
		}
	}
	res := &ExecResult{Stdout: om.out, Stderr: em.out, StdoutTruncated: om.truncated, StderrTruncated: em.truncated}
	if om.err != nil || em.err != nil {
		// The shell is gone: killed by us, or the command ended it.
		p.p.kill()
		st, werr := p.p.wait()
		s.dropProc(p)
		res.ExitStatus = st
		switch {
		case killed:
			res.TimedOut = true
			res.Code, res.Signal = 128+int(syscall.SIGKILL), int(syscall.SIGKILL)
			return res, fmt.Errorf("shell session: command %s %s and did not stop within %s of SIGINT: "+
				"the shell was killed and restarted, so its working directory and variables are reset: %w: %w",
				quoteArgv(argv), why, s.grace, errdefs.ErrTimeout, ErrSessionRestarted)
		case p.stopErr() != nil:
			return res, p.stopErr()
		case werr != nil && !errors.Is(werr, errdefs.ErrClosed):
			return res, fmt.Errorf("shell session: %w", werr)
		}
		return res, nil
	}
	code, _ := strconv.Atoi(om.fields[1])
	res.Code = code
	if code > 128 && code < 128+65 {
		res.Signal = code - 128
	}
	if interrupted {
		res.TimedOut = true
		return res, errdefs.Errorf(errdefs.ErrTimeout, "shell session: command %s %s: SIGINT stopped it; the shell keeps its state", quoteArgv(argv), why)
	}
	return res, nil
}

// Reset starts a fresh shell, back to the session's working directory and
// environment; a running command is killed (its Exec returns ErrClosed).
func (s *ShellSession) Reset(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errdefs.Errorf(errdefs.ErrClosed, "reset shell session: it is closed")
	}
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.stop(errdefs.Errorf(errdefs.ErrClosed, "shell session: the session was reset"))
	}
	select {
	case s.busy <- struct{}{}:
	case <-ctx.Done():
		return errdefs.Errorf(errdefs.ErrTimeout, "reset shell session: %v", ctx.Err())
	}
	defer func() { <-s.busy }()
	_, err := s.ensure(ctx)
	return err
}

// Close ends the shell (and what it runs). Closing twice is a no-op.
func (s *ShellSession) Close() error {
	s.mu.Lock()
	p := s.proc
	s.closed, s.proc = true, nil
	s.mu.Unlock()
	if p != nil {
		p.stop(errdefs.Errorf(errdefs.ErrClosed, "shell session: closed"))
	}
	return nil
}

func (s *ShellSession) dropProc(p *shProc) {
	p.out.abandon()
	p.err.abandon()
	s.mu.Lock()
	if s.proc == p {
		s.proc = nil
	}
	s.mu.Unlock()
}

// ensure returns the shell, starting one if needed; callers hold busy.
func (s *ShellSession) ensure(ctx context.Context) (*shProc, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errdefs.Errorf(errdefs.ErrClosed, "shell session: it is closed")
	}
	if s.proc != nil {
		p := s.proc
		s.mu.Unlock()
		return p, nil
	}
	s.mu.Unlock()
	p, err := s.launch(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		p.p.kill()
		return nil, errdefs.Errorf(errdefs.ErrClosed, "shell session: it is closed")
	}
	s.proc = p
	s.launches++
	return p, nil
}

func (s *ShellSession) launch(ctx context.Context) (*shProc, error) {
	ctx, cancel := context.WithTimeout(ctx, sessionStartTimeout)
	defer cancel()
	shell := firstNonEmpty(s.opts.Shell, defaultShell)
	var tok [16]byte
	rand.Read(tok[:])
	token := "bxs" + hex.EncodeToString(tok[:])
	sp, err := s.start(ctx, []string{shell}, s.opts)
	if err != nil {
		return nil, fmt.Errorf("shell session: start %s: %w", shell, err)
	}
	p := &shProc{p: sp, token: token, out: newMarkerStream(token, s.opts.OutputLimit), err: newMarkerStream(token, s.opts.OutputLimit)}
	go p.out.run(sp.stdout())
	go p.err.run(sp.stderr())
	// SIGINT interrupts the command, not the shell: a trap that does nothing
	// (a trap, not an ignore, so commands get the default action back).
	init := fmt.Sprintf("trap : INT\nprintf '%%s 0 %%d\\n' %s $$\nprintf '%%s 0\\n' %s >&2\n", token, token)
	type ready struct {
		fields []string
		err    error
	}
	ch := make(chan ready, 1)
	go func() {
		_, f, _, err := p.out.next(0, 0)
		if err == nil {
			_, _, _, err = p.err.next(0, 0)
		}
		ch <- ready{f, err}
	}()
	if _, err := io.WriteString(sp.stdin(), init); err != nil {
		sp.kill()
	}
	var r ready
	select {
	case r = <-ch:
	case <-ctx.Done():
		sp.kill()
		r = <-ch
		r.err = errdefs.Errorf(errdefs.ErrTimeout, "%v", ctx.Err())
	}
	if r.err != nil {
		sp.kill()
		_, werr := sp.wait()
		if werr != nil && !errors.Is(werr, errdefs.ErrClosed) {
			return nil, fmt.Errorf("shell session: start %s: %w", shell, werr)
		}
		return nil, errdefs.Errorf(errdefs.ErrInvalidState, "shell session: %s did not start (%v)", shell, r.err)
	}
	p.pid, _ = strconv.Atoi(r.fields[1])
	return p, nil
}

type shProc struct {
	p        sessionProc
	token    string
	pid      int
	out, err *markerStream

	mu      sync.Mutex
	stopped error // why the session ended this shell on purpose
}

func (p *shProc) stop(err error) {
	p.mu.Lock()
	if p.stopped == nil {
		p.stopped = err
	}
	p.mu.Unlock()
	p.p.kill()
	p.out.abandon()
	p.err.abandon()
}

func (p *shProc) stopErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}

// markerStream is one output stream of the shell, cut at the markers. The
// reader holds at most maxMarkerPending bytes that no command has taken yet
// (then it stops reading, and the shell blocks as on a full pipe); a command
// keeps at most limit bytes of its output and drops the rest.
type markerStream struct {
	token []byte
	limit int64

	mu        sync.Mutex
	cond      *sync.Cond
	buf       []byte
	scanned   int   // buf[:scanned] holds no whole token
	err       error // the stream ended
	abandoned bool  // the shell was dropped: read and discard
}

const maxMarkerPending = 1 << 20

func newMarkerStream(token string, limit int64) *markerStream {
	m := &markerStream{token: []byte(token), limit: limit}
	m.cond = sync.NewCond(&m.mu)
	return m
}

func (m *markerStream) run(r io.Reader) {
	b := make([]byte, 64<<10)
	for {
		n, err := r.Read(b)
		m.mu.Lock()
		if !m.abandoned {
			m.buf = append(m.buf, b[:n]...)
		}
		if err != nil {
			m.err = err
		}
		m.cond.Broadcast()
		for len(m.buf) >= maxMarkerPending && m.err == nil && !m.abandoned {
			m.cond.Wait()
		}
		m.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// abandon lets the reader drain the stream without keeping anything.
func (m *markerStream) abandon() {
	m.mu.Lock()
	m.abandoned, m.buf, m.scanned = true, nil, 0
	m.mu.Unlock()
	m.cond.Broadcast()
}

// next returns the output before the marker of seq and the marker's fields
// (token excluded: seq, then the status on stdout), with truncated set when
// more than limit (0: the stream's) came. Output after a marker belongs to
// the next command. An error means the stream ended first; the output so far
// is returned with it.
func (m *markerStream) next(seq int, limit int64) (out []byte, fields []string, truncated bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if limit == 0 {
		limit = m.limit
	}
	o := newCapBuffer(limit)
	defer func() { out, truncated = o.Bytes(), o.Truncated() }()
	for {
		if i := bytes.Index(m.buf[m.scanned:], m.token); i >= 0 {
			i += m.scanned
			if j := bytes.IndexByte(m.buf[i:], '\n'); j >= 0 {
				fields := strings.Fields(string(m.buf[i+len(m.token) : i+j]))
				o.Write(m.buf[:i])
				m.buf = m.buf[i+j+1:]
				m.scanned = 0
				m.cond.Broadcast()
				if len(fields) >= 1 && fields[0] == strconv.Itoa(seq) {
					return nil, fields, false, nil
				}
				continue // a marker of an earlier command: not ours
			}
			if len(m.buf)-i > maxMarkerPending/2 { // a "marker" line that never ends is output
				m.scanned = i + 1
				continue
			}
		} else if keep := len(m.token) - 1; len(m.buf) > keep {
			// No whole token here: all but a possible token's start is output.
			o.Write(m.buf[:len(m.buf)-keep])
			m.buf = append([]byte(nil), m.buf[len(m.buf)-keep:]...)
			m.scanned = 0
			m.cond.Broadcast()
		}
		if m.err != nil {
			o.Write(m.buf)
			m.buf = nil
			return nil, nil, false, m.err
		}
		m.cond.Wait()
	}
}
