package boxlite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/session"
)

// A code context is a code interpreter's persistent session, as E2B's
// (and Jupyter's) contexts: code runs in it cell by cell, keeping state,
// and each cell gives back rich results besides its output.

// The languages of code contexts.
const (
	LanguagePython     = "python"     // the Python session driver, rich results
	LanguageJavaScript = "javascript" // Node (node or nodejs on PATH)
	LanguageBash       = "bash"       // a bash shell session
)

// CodeResult is a rich result of a cell: a MIME bundle (Data) of the value
// of its last expression (IsMain), of a display() call or of a matplotlib
// figure.
type CodeResult = session.Result

// CodeError is what a cell raised: Name is the exception's class
// (ZeroDivisionError, TypeError), Value its message, Traceback as the
// interpreter prints it. A bash cell that exits non-zero has Name
// "ExitCode" and Value the code.
type CodeError struct {
	Name, Value, Traceback string
}

// CodeLogs are what a cell printed, in the chunks it came in.
type CodeLogs struct {
	Stdout, Stderr []string
	// StdoutTruncated and StderrTruncated report output dropped past the
	// context's output limit (SessionOptions.OutputLimit, per stream).
	StdoutTruncated, StderrTruncated bool
}

// CodeExecution is what a cell did (CodeContext.RunCode).
type CodeExecution struct {
	Results []CodeResult
	Logs    CodeLogs
	Error   *CodeError // nil when the cell completed
	// ExecutionCount numbers the cells of the context from 1 (Restart
	// starts again).
	ExecutionCount int
	// ResultsTruncated reports results dropped past the output limit.
	ResultsTruncated bool
	// Restarted: the interpreter ended under the cell (killed after an
	// ignored interrupt, or it exited) and was started again: state is gone.
	Restarted bool
}

// Text is the main result's text/plain ("" when the cell has none), as
// E2B's Execution.text.
func (e *CodeExecution) Text() string {
	for _, r := range e.Results {
		if r.IsMain {
			return r.Text()
		}
	}
	return ""
}

// RunCodeOptions are how a cell runs. The callbacks, called in the order
// of the cell's output from the goroutine of RunCode, see everything as it
// comes; a slow callback holds the cell back (output waits, bounded).
type RunCodeOptions struct {
	// Timeout interrupts the cell (KeyboardInterrupt, SIGINT); 0: none.
	Timeout time.Duration
	// Env is set in the interpreter's environment for this cell only.
	Env      map[string]string
	OnStdout func(text string)
	OnStderr func(text string)
	OnResult func(CodeResult)
	// StreamOnly keeps nothing in the CodeExecution but its error and
	// count: the callbacks had it all.
	StreamOnly bool
}

// CodeContext is a persistent session of a code interpreter in a box;
// cells run one at a time. It is safe for concurrent use.
type CodeContext struct {
	lang  string
	cwd   string
	opts  SessionOptions
	drv   *session.Python // python, javascript
	sh    *session.Shell  // bash
	mu    sync.Mutex
	count int
}

// NormalizeLanguage maps a language's names ("" and "py" python, "js"
// and "node" javascript, "sh" and "shell" bash, any case) to the one a
// code context has, or fails with ErrInvalidArgument.
func NormalizeLanguage(lang string) (string, error) {
	switch l := strings.ToLower(strings.TrimSpace(lang)); l {
	case "", "python", "python3", "py":
		return LanguagePython, nil
	case "javascript", "js", "node", "nodejs":
		return LanguageJavaScript, nil
	case "bash", "sh", "shell":
		return LanguageBash, nil
	default:
		return "", errdefs.Errorf(errdefs.ErrInvalidArgument, "code context: language %q is not python, javascript or bash", lang)
	}
}

// NewCodeContext starts a code context of language (see NormalizeLanguage)
// in the box: a Python or Node interpreter running the session driver, or
// bash (SessionOptions.Shell, default bash). opts.Python is for python
// contexts, opts.Shell for bash ones. It fails with ErrNotFound when the
// image lacks the interpreter.
func (b *Box) NewCodeContext(ctx context.Context, language string, opts SessionOptions) (*CodeContext, error) {
	opts = b.sessionDefaults(opts)
	cwd := opts.Cwd
	if cwd == "" {
		cwd = b.rec.Config.WorkingDir
		if img, err := b.image(); cwd == "" && err == nil {
			cwd = img.Config.WorkingDir
		}
		cwd = firstNonEmpty(cwd, "/")
	}
	return NewCodeContextWith(ctx, language, b.sessionStarter(), opts, b.holdAwake, cwd)
}

// NewCodeContextWith starts a code context whose processes start runs: a
// backend's box other than a local one (internal/restclient). cwd is the
// working directory its interpreter starts in; onBusy may be nil.
func NewCodeContextWith(ctx context.Context, language string, start session.Starter, opts SessionOptions, onBusy session.BusyFunc, cwd string) (*CodeContext, error) {
	lang, err := NormalizeLanguage(language)
	if err != nil {
		return nil, err
	}
	if opts.Python != "" && lang != LanguagePython {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "code context: the python option is for python contexts")
	}
	if opts.Shell != "" && lang != LanguageBash {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "code context: the shell option is for bash contexts")
	}
	c := &CodeContext{lang: lang, opts: opts, cwd: cwd}
	switch lang {
	case LanguagePython:
		c.drv, err = session.NewPython(ctx, start, opts, onBusy)
	case LanguageJavaScript:
		c.drv, err = session.NewJavaScript(ctx, start, opts, onBusy)
	default:
		if opts.Shell == "" {
			opts.Shell = "bash"
		}
		c.sh, err = session.NewShell(ctx, start, opts, onBusy)
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Language is the context's: python, javascript or bash.
func (c *CodeContext) Language() string { return c.lang }

// Cwd is the working directory the context's interpreter started in.
func (c *CodeContext) Cwd() string { return c.cwd }

// Options are what the context was started with, the box's defaults filled in.
func (c *CodeContext) Options() SessionOptions { return c.opts }

// RunCode runs code as a cell of the context and returns what it did. An
// exception in the cell is the execution's Error, not an error. A timeout
// (or cancelling ctx) interrupts the cell: the error wraps ErrTimeout and
// the execution holds what it did until then; a cell that ignores the
// interrupt is killed with its interpreter (state lost: Restarted, and the
// error wraps ErrSessionRestarted too). o may be nil.
func (c *CodeContext) RunCode(ctx context.Context, code string, o *RunCodeOptions) (*CodeExecution, error) {
	if o == nil {
		o = &RunCodeOptions{}
	}
	c.mu.Lock()
	c.count++
	n := c.count
	c.mu.Unlock()
	ex := &CodeExecution{ExecutionCount: n}
	lg := &logSink{o: o, ex: ex, limit: c.opts.OutputLimit}
	if c.sh != nil {
		return c.runBash(ctx, code, o, ex, lg)
	}
	cell, err := c.drv.RunStreamOpts(ctx, code, session.RunOptions{Timeout: o.Timeout, Rich: true, Env: o.Env})
	if err != nil {
		return nil, err
	}
	for {
		ch, err := cell.Next(context.Background()) // the cell ends: ctx and the timeout interrupt it
		if err == io.EOF {
			break
		}
		if err != nil {
			cell.Close()
			return nil, err
		}
		if ch.Stream == session.StreamResult {
			lg.result(*ch.Result)
		} else {
			lg.output(ch.Stream, ch.Data)
		}
	}
	r, err := cell.Result(context.Background())
	lg.flush()
	for _, res := range r.Results { // none: Next had them all
		lg.result(res)
	}
	ex.ResultsTruncated = ex.ResultsTruncated || r.ResultsTruncated
	ex.Restarted = r.Restarted
	if r.Error != nil {
		ex.Error = &CodeError{Name: r.Error.Type, Value: r.Error.Message, Traceback: r.Error.Traceback}
	}
	return ex, err
}

// runBash runs a bash cell: eval'ed by the context's shell, so its cd,
// variables and functions stay. Its output comes when it ends.
func (c *CodeContext) runBash(ctx context.Context, code string, o *RunCodeOptions, ex *CodeExecution, lg *logSink) (*CodeExecution, error) {
	script, err := bashCell(code, o.Env)
	if err != nil {
		return nil, err
	}
	r, err := c.sh.Exec(ctx, []string{"eval", script}, nil, o.Timeout, 0)
	if r == nil {
		return nil, err
	}
	lg.output(1, r.Stdout)
	lg.output(2, r.Stderr)
	lg.flush()
	ex.Logs.StdoutTruncated = ex.Logs.StdoutTruncated || r.StdoutTruncated
	ex.Logs.StderrTruncated = ex.Logs.StderrTruncated || r.StderrTruncated
	ex.Restarted = errors.Is(err, session.ErrRestarted)
	if r.Code != 0 {
		ex.Error = &CodeError{Name: "ExitCode", Value: strconv.Itoa(r.Code)}
	}
	return ex, err
}

// bashCell is the script that runs code with env set for it alone.
func bashCell(code string, env map[string]string) (string, error) {
	if strings.ContainsRune(code, 0) {
		return "", errdefs.Errorf(errdefs.ErrInvalidArgument, "bash cell: the code contains a NUL byte")
	}
	if len(env) == 0 {
		return code, nil
	}
	keys := make([]string, 0, len(env))
	for k, v := range env {
		if !isShellName(k) {
			return "", errdefs.Errorf(errdefs.ErrInvalidArgument, "bash cell: env key %q is not a shell variable name", k)
		}
		if strings.ContainsRune(v, 0) {
			return "", errdefs.Errorf(errdefs.ErrInvalidArgument, "bash cell: env %s contains a NUL byte", k)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var pre, post strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&pre, "__bx_s_%[1]s=${%[1]s+x}; __bx_o_%[1]s=${%[1]s-}; export %[1]s=%[2]s\n", k, shellQuote(env[k]))
		fmt.Fprintf(&post, "if [ -n \"$__bx_s_%[1]s\" ]; then %[1]s=$__bx_o_%[1]s; else unset %[1]s; fi; unset __bx_s_%[1]s __bx_o_%[1]s\n", k)
	}
	return pre.String() + "eval " + shellQuote(code) + "\n__bx_rc=$?\n" + post.String() + "(exit $__bx_rc)", nil
}

func isShellName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Pid is the interpreter's (or shell's) process id in the box.
func (c *CodeContext) Pid() int {
	if c.drv != nil {
		return c.drv.Pid()
	}
	return c.sh.Pid()
}

// Restarts counts the interpreters started after the first.
func (c *CodeContext) Restarts() int {
	if c.drv != nil {
		return c.drv.Restarts()
	}
	return c.sh.Restarts()
}

// Interrupt stops the running cell as its timeout would; a no-op when idle.
func (c *CodeContext) Interrupt() {
	if c.drv != nil {
		c.drv.Interrupt()
	} else {
		c.sh.Interrupt()
	}
}

// Restart starts a fresh interpreter: the context's state is gone and the
// execution count starts again. A running cell ends with ErrClosed.
func (c *CodeContext) Restart(ctx context.Context) error {
	var err error
	if c.drv != nil {
		err = c.drv.Reset(ctx)
	} else {
		err = c.sh.Reset(ctx)
	}
	c.mu.Lock()
	c.count = 0
	c.mu.Unlock()
	return err
}

// Close stops the interpreter. Closing twice is a no-op.
func (c *CodeContext) Close() error {
	if c.drv != nil {
		return c.drv.Close()
	}
	return c.sh.Close()
}

// logSink hands a cell's output to the callbacks as text (whole UTF-8
// characters) and keeps it, bounded, in the execution.
type logSink struct {
	o        *RunCodeOptions
	ex       *CodeExecution
	limit    int64
	kept     [3]int64 // per stream: stdout, stderr, results
	pend     [3][]byte
	resBytes int64
}

func (l *logSink) output(stream int, b []byte) {
	if stream != 1 && stream != 2 {
		return
	}
	b = append(l.pend[stream], b...)
	cut := len(b)
	// leave an incomplete last character for the next chunk
	for i := 1; i <= 3 && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				cut = len(b) - i
			}
			break
		}
	}
	l.pend[stream] = append([]byte(nil), b[cut:]...)
	l.emit(stream, b[:cut])
}

func (l *logSink) flush() {
	for s := 1; s <= 2; s++ {
		if len(l.pend[s]) > 0 {
			b := l.pend[s]
			l.pend[s] = nil
			l.emit(s, b)
		}
	}
}

func (l *logSink) emit(stream int, b []byte) {
	if len(b) == 0 {
		return
	}
	text := strings.ToValidUTF8(string(b), "\uFFFD")
	cb, logs, cut := l.o.OnStdout, &l.ex.Logs.Stdout, &l.ex.Logs.StdoutTruncated
	if stream == 2 {
		cb, logs, cut = l.o.OnStderr, &l.ex.Logs.Stderr, &l.ex.Logs.StderrTruncated
	}
	if cb != nil {
		cb(text)
	}
	if l.o.StreamOnly {
		return
	}
	if l.kept[stream]+int64(len(text)) > l.limit {
		*cut = true
		return
	}
	l.kept[stream] += int64(len(text))
	*logs = append(*logs, text)
}

func (l *logSink) result(r CodeResult) {
	if l.o.OnResult != nil {
		l.o.OnResult(r)
	}
	if l.o.StreamOnly {
		return
	}
	n := int64(0)
	for k, v := range r.Data {
		n += int64(len(k) + len(v))
	}
	if l.resBytes+n > l.limit {
		l.ex.ResultsTruncated = true
		return
	}
	l.resBytes += n
	l.ex.Results = append(l.ex.Results, r)
}
