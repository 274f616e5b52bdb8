'use strict';
// The hand-over of this process's terminal to a tty execution in a box
// (InteractiveBox.start with tty).

/**
 * Connects process.stdin/stdout to a tty execution until it ends: raw mode
 * while it runs (restored after, even on failure), keys to its stdin,
 * output to stdout, this terminal's resizes to it.
 */
async function forwardTerminal(ex) {
  const input = process.stdin;
  const out = process.stdout;
  const raw = !!input.isTTY && typeof input.setRawMode === 'function';
  const stdin = ex.stdin;
  let typing = Promise.resolve();
  // The end of input types ^D, which a shell only sees as EOF once its line
  // editor reads (typed earlier, the terminal's mode change can drop it):
  // so not before its first output.
  let shown;
  let timer = null;
  const firstOutput = new Promise((resolve) => {
    shown = resolve;
  });
  const onData = (b) => {
    typing = typing.then(() => stdin.write(b)).catch(() => {}); // the shell has exited
  };
  const onEnd = () => {
    typing = typing.then(() => firstOutput).then(() => stdin.close()).catch(() => {});
  };
  const onResize = () => {
    ex.resizeTty(out.rows, out.columns).catch(() => {});
  };
  if (raw) input.setRawMode(true);
  input.on('data', onData);
  input.on('end', onEnd);
  input.resume();
  if (out.isTTY) out.on('resize', onResize);
  try {
    for await (const b of ex.stdout.buffers()) {
      if (!out.write(b)) await new Promise((resolve) => out.once('drain', resolve));
      timer ??= setTimeout(shown, 200); // once: the prompt is out, the line editor set up
    }
  } finally {
    clearTimeout(timer);
    shown();
    if (out.isTTY) out.off('resize', onResize);
    input.off('data', onData);
    input.off('end', onEnd);
    input.pause();
    if (raw) input.setRawMode(false);
  }
}

module.exports = { forwardTerminal };
