'use strict';
// InteractiveBox: a SimpleBox with a shell, driven by this terminal (tty) or
// by a program (pipes); exec() runs in a live shell session.
const { SimpleBox, parseExec } = require('./simplebox');
const { BoxliteError, TimeoutError } = require('./errors');
const { checkString, isPlainObject, typeOf } = require('./options');
const { ShellSession } = require('./session');
const { forwardTerminal } = require('./terminal');

// The name of exec()'s shell session in the box.
const SHELL_SESSION_NAME = 'interactive';

class InteractiveBox extends SimpleBox {
  /**
   * new InteractiveBox({ shell = '/bin/sh', tty, ...SimpleBox options })
   *
   * tty (default: whether this process's stdin is a terminal, as in BoxLite):
   * start() runs the shell on a terminal in the box, sized like this one, and
   * hands this terminal to it: stdin in raw mode (every key goes to the box,
   * ^C and ^D included), the box's output to stdout, resizes followed. wait()
   * resolves when the shell exits; the terminal is restored then (or by
   * stop()). With tty false, start() runs the shell with plain pipes
   * (execution.stdin / stdout) for a program to drive.
   */
  constructor(options = {}) {
    if (!isPlainObject(options)) throw new TypeError(`options must be an object, got ${typeOf(options)}`);
    const { shell = '/bin/sh', tty, ...rest } = options;
    if (tty !== undefined && tty !== null && typeof tty !== 'boolean') throw new TypeError(`options.tty must be a boolean, got ${typeOf(tty)}`);
    const onTty = tty ?? !!process.stdin.isTTY;
    if (!onTty && typeof shell === 'string' && shell.startsWith('/') && rest.prestart === undefined) {
      // A box started from a template finds exec()'s shell started.
      rest.prestart = [shell === '/bin/sh' ? 'shell' : `shell:${shell}`];
    }
    super(rest);
    this._shell = checkString(shell, 'options.shell');
    this._tty = onTty;
    this._execution = null;
    this._forwarding = null; // Promise of the terminal hand-over, with tty
    this._initSessions();
  }

  /** @internal Fresh session state (the constructor's, a fork's). */
  _initSessions() {
    this._sh = null; // Promise of the shell session exec() runs in
  }

  /** Whether start() hands the terminal over. */
  get tty() {
    return this._tty;
  }

  /** The live shell that exec() runs in, started on first use. */
  shellSession() {
    if (!this._sh) {
      // A named session on a local runtime: an InteractiveBox on the same box
      // (another process, after a pause, a fork) takes the shell over.
      const named = this._runtime._remote ? {} : { name: SHELL_SESSION_NAME };
      this._sh = this._ensureBox().then((box) => ShellSession._start(box, { shell: this._shell, ...named }));
      this._sh.catch(() => {
        this._sh = null;
      });
    }
    return this._sh.then((s) => {
      if (!s.closed) return s;
      this._sh = null;
      return this.shellSession();
    });
  }

  /**
   * Runs a command in the box's live shell: the working directory, exported
   * and shell variables and functions of one exec are there for the next
   * (exec('eval', script) runs shell code). Each argument is one word; stdin
   * is /dev/null; env is for this command only. Same forms and result as
   * SimpleBox.exec; with cwd, user or tty the command runs outside the shell.
   */
  async exec(cmd, ...rest) {
    const c = parseExec(cmd, rest);
    if (c.cwd !== undefined || c.user !== undefined || c.tty) return super.exec(cmd, ...rest);
    const sh = await this.shellSession();
    try {
      return await sh.exec(c.argv, { env: c.env, timeoutSecs: c.timeoutSecs, outputLimitBytes: c.outputLimitBytes });
    } catch (e) {
      if (e instanceof TimeoutError) {
        // A result, as SimpleBox.exec's (BoxLite 0.10); the shell session itself rejects.
        const restarted = /restarted/.test(e.message) ? '; it ignored SIGINT, so the shell was restarted (working directory and variables reset)' : '';
        return {
          exitCode: e.exitCode, stdout: e.stdout ?? '', stderr: e.stderr ?? '',
          stdoutTruncated: !!e.stdoutTruncated, stderrTruncated: !!e.stderrTruncated,
          timedOut: true, errorMessage: `exec ${JSON.stringify(c.argv)}: timed out after ${c.timeoutSecs}s${restarted}`,
        };
      }
      throw e;
    }
  }

  /** Restarts exec()'s shell: working directory and variables back to the start. */
  async reset() {
    if (this._sh) await (await this.shellSession()).reset();
  }

  /** Starts the shell: on a terminal handed this one with tty, else on pipes. */
  async start() {
    if (this._execution) return;
    const box = await this._ensureBox();
    if (!this._tty) {
      this._execution = await box.exec({ argv: [this._shell], stdin: true });
      return;
    }
    const out = process.stdout;
    const size = out.isTTY ? { rows: out.rows, cols: out.columns } : {};
    this._execution = await box.exec({ argv: [this._shell], stdin: true, tty: true, ...size });
    this._forwarding = forwardTerminal(this._execution);
  }

  /** The shell's Execution (stdin, stdout, stderr), once started. */
  get execution() {
    return this._execution;
  }

  /** Writes to the shell's stdin. */
  async write(data) {
    return this._started('write').stdin.write(data);
  }

  async closeStdin() {
    return this._started('closeStdin').stdin.close();
  }

  /** Waits for the shell to exit (with tty, the terminal is restored first); resolves to {exitCode, signal, timedOut}. */
  async wait() {
    const ex = this._started('wait');
    if (this._forwarding) await this._forwarding;
    return ex.wait();
  }

  _started(op) {
    if (!this._execution) throw new BoxliteError(`${op}: call start() first`, { code: 'invalid_state' });
    return this._execution;
  }

  async stop() {
    if (this._execution) this._execution.close();
    if (this._forwarding) await this._forwarding.catch(() => {}); // restores the terminal
    const sh = this._sh;
    this._sh = null;
    if (sh) {
      try {
        (await sh).close();
      } catch {
        // it never started
      }
    }
    return super.stop();
  }
}

module.exports = { InteractiveBox };
