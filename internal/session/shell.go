package session

import (
	"cmp"
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

// A shell session is one long-lived sh fed commands on its stdin, each
// followed by the markers of marker.go.

// DefaultShell is a shell session's unless Options.Shell names one.
const DefaultShell = "/bin/sh"

// maxShellCommand bounds the script one Exec sends (as the exec protocol
// bounds an argv).
const maxShellCommand = 1 << 20

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

// ShellResult is what a shell session's command did.
type ShellResult struct {
	ExitStatus
	Stdout, Stderr []byte
	TimedOut       bool // the timeout (or the caller) interrupted it
	// StdoutTruncated and StderrTruncated report output beyond the limit
	// that the result does not hold.
	StdoutTruncated, StderrTruncated bool
}

// Shell is a live shell in a box: the working directory, exported and
// shell variables and functions set by one Exec are there for the next.
// Commands run one at a time; a Shell is safe for concurrent use.
type Shell struct {
	start Starter
	opts  Options
	grace time.Duration
	sup   *supervisor[*shProc]

	mu        sync.Mutex
	seq       int
	interrupt chan struct{} // closed by Interrupt; replaced per command
}

// NewShell starts a shell (Options.Shell, default /bin/sh) with start.
// onBusy (nil: none) is told when each command begins and ends.
func NewShell(ctx context.Context, start Starter, opts Options, onBusy BusyFunc) (*Shell, error) {
	if err := opts.check("shell session"); err != nil {
		return nil, err
	}
	s := &Shell{start: start, opts: opts, grace: opts.grace()}
	s.sup = newSupervisor("shell session", "command", s.launch, onBusy)
	s.sup.keep = opts.Name != ""
	if _, err := s.sup.ensure(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Pid is the shell's process id in the box (0 while none runs).
func (s *Shell) Pid() int {
	if p := s.sup.current(); p != nil {
		return p.pid
	}
	return 0
}

// Restarts counts the shells started after the first.
func (s *Shell) Restarts() int { return s.sup.restarts() }

// Interrupt stops the command running now as its timeout would (SIGINT,
// then the shell is killed after the grace period); a no-op when idle.
func (s *Shell) Interrupt() {
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

// Reset starts a fresh shell, back to the session's working directory and
// environment; a running command is killed (its Exec returns ErrClosed).
func (s *Shell) Reset(ctx context.Context) error { return s.sup.reset(ctx) }

// Close ends the shell (and what it runs). Closing twice is a no-op.
func (s *Shell) Close() error { return s.sup.close() }

// script is the line that runs argv (with env for it alone) in the shell.
func script(argv []string, env map[string]string) (string, error) {
	if len(argv) == 0 || argv[0] == "" {
		return "", errdefs.Errorf(errdefs.ErrInvalidArgument, "shell session: empty command")
	}
	for _, a := range argv {
		if strings.ContainsRune(a, 0) {
			return "", errdefs.Errorf(errdefs.ErrInvalidArgument, "shell session: argument %q contains a NUL byte", a)
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
				return "", errdefs.Errorf(errdefs.ErrInvalidArgument, "shell session: env key %q is not a shell variable name", k)
			}
			if strings.ContainsRune(v, 0) {
				return "", errdefs.Errorf(errdefs.ErrInvalidArgument, "shell session: env %s contains a NUL byte", k)
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
		return "", errdefs.Errorf(errdefs.ErrLimit, "shell session: command of %d bytes exceeds %d", len(line), maxShellCommand)
	}
	return line, nil
}

// Exec runs argv in the session's shell, each argument quoted as one word
// (never joined into a script), and returns its exit code and output, at
// most limit bytes of each stream (0: Options.OutputLimit). The command may
// be a builtin (cd, export, eval "SCRIPT" for shell code) or a function
// defined earlier; its stdin is /dev/null. env applies to this command
// only: it then runs in a subshell, so its own changes to the shell do not
// stay. A timeout (0: none) sends SIGINT to the command's process group and
// returns ErrTimeout, the shell keeping its state; a command still running
// after the grace period is killed with the shell, which is started again
// (the error wraps ErrRestarted). If the command ends the shell (exit,
// exec), the result is the shell's exit and the next Exec gets a new shell.
func (s *Shell) Exec(ctx context.Context, argv []string, env map[string]string, timeout time.Duration, limit int64) (*ShellResult, error) {
	if limit < 0 {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "shell session: negative output limit %d", limit)
	}
	if timeout < 0 {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "shell session: negative timeout")
	}
	line, err := script(argv, env)
	if err != nil {
		return nil, err
	}
	if err := s.sup.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.sup.release()
	p, err := s.sup.ensure(ctx)
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
	cmd := fmt.Sprintf("%s </dev/null\nprintf '%%s %%d %%d\\n' %s %d $?\nprintf '%%s %%d\\n' %s %d >&2\n", line, p.token, seq, p.token, seq)

	type marker struct {
		out       []byte
		fields    []string
		truncated bool
		err       error
	}
	outCh, errCh := make(chan marker, 1), make(chan marker, 1)
	go func() { o, f, t, err := p.out.next(seq, limit); outCh <- marker{o, f, t, err} }()
	go func() { o, f, t, err := p.err.next(seq, limit); errCh <- marker{o, f, t, err} }()
	if _, err := io.WriteString(p.p.Stdin(), cmd); err != nil {
		p.p.Kill()
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
			p.p.Kill()
		}
		if why != "" && !interrupted {
			interrupted = true
			// The shell traps SIGINT; the command, in the shell's group
			// (a non-interactive shell makes none of its own), gets it.
			if err := p.p.SignalGroup(syscall.SIGINT); err != nil {
				killed = true
				p.p.Kill()
			} else {
				g := time.NewTimer(s.grace)
				defer g.Stop()
				grace = g.C
			}
		}
	}
	res := &ShellResult{Stdout: om.out, Stderr: em.out, StdoutTruncated: om.truncated, StderrTruncated: em.truncated}
	if om.err != nil || em.err != nil {
		// The shell is gone: killed by us, or the command ended it.
		p.p.Kill()
		st, werr := p.p.Wait()
		p.end()
		s.sup.restart(p)
		res.ExitStatus = st
		switch {
		case killed:
			res.TimedOut = true
			res.Code, res.Signal = 128+int(syscall.SIGKILL), int(syscall.SIGKILL)
			return res, fmt.Errorf("shell session: command %q %s and did not stop within %s of SIGINT: "+
				"the shell was killed and restarted, so its working directory and variables are reset: %w: %w",
				argv, why, s.grace, errdefs.ErrTimeout, ErrRestarted)
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
		return res, errdefs.Errorf(errdefs.ErrTimeout, "shell session: command %q %s: SIGINT stopped it; the shell keeps its state", argv, why)
	}
	return res, nil
}

func (s *Shell) launch(ctx context.Context) (*shProc, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	shell := cmp.Or(s.opts.Shell, DefaultShell)
	var tok [16]byte
	rand.Read(tok[:])
	token := "bxs" + hex.EncodeToString(tok[:])
	sp, err := s.start(ctx, []string{shell}, s.opts.qualified("shell"))
	if err != nil {
		return nil, fmt.Errorf("shell session: start %s: %w", shell, err)
	}
	p := &shProc{p: sp, token: token, out: newMarkerStream(token, s.opts.OutputLimit), err: newMarkerStream(token, s.opts.OutputLimit)}
	go p.out.run(sp.Stdout())
	go p.err.run(sp.Stderr())
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
	if _, err := io.WriteString(sp.Stdin(), init); err != nil {
		sp.Kill()
	}
	var r ready
	select {
	case r = <-ch:
	case <-ctx.Done():
		sp.Kill()
		r = <-ch
		r.err = errdefs.Errorf(errdefs.ErrTimeout, "%v", ctx.Err())
	}
	if r.err != nil {
		sp.Kill()
		_, werr := sp.Wait()
		if werr != nil && !errors.Is(werr, errdefs.ErrClosed) {
			return nil, fmt.Errorf("shell session: start %s: %w", shell, werr)
		}
		return nil, errdefs.Errorf(errdefs.ErrInvalidState, "shell session: %s did not start (%v)", shell, r.err)
	}
	p.pid, _ = strconv.Atoi(r.fields[1])
	return p, nil
}

// shProc is one shell of a shell session.
type shProc struct {
	p        Process
	token    string
	pid      int
	out, err *markerStream

	mu      sync.Mutex
	stopped error // why the session ended this shell on purpose
	ended   bool  // a command found it gone
}

func (p *shProc) dead() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ended
}

func (p *shProc) stop(err error) {
	p.mu.Lock()
	if p.stopped == nil {
		p.stopped = err
	}
	p.mu.Unlock()
	p.p.Kill()
	p.out.abandon()
	p.err.abandon()
}

// detach lets go of a named session's shell, which runs on.
func (p *shProc) detach(err error) {
	p.mu.Lock()
	if p.stopped == nil {
		p.stopped = err
	}
	p.mu.Unlock()
	detachOrKill(p.p)
	p.out.abandon()
	p.err.abandon()
}

// end records that the shell is gone and lets its streams drain.
func (p *shProc) end() {
	p.mu.Lock()
	p.ended = true
	p.mu.Unlock()
	p.out.abandon()
	p.err.abandon()
}

func (p *shProc) stopErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}
