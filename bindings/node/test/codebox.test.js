'use strict';
// CodeBox on python:slim: BoxLite's documented Node example runs unchanged
// from a project that installed this package, and CodeBox's errors.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync, execFile } = require('node:child_process');
const { JsBoxlite, CodeBox, ExecError, TimeoutError, BoxliteError } = require('..');
const { pkg, home, REST, newRuntime, localOnly, ensureImage, missingImage } = require('./helpers');
const native = require('../lib/raw');

const skip = missingImage('python:slim');
const T = { timeout: 300_000 };

// BoxLite's Node CodeBox example (docs: "Execute AI-generated code", plus the
// ExecError handling of the SDK README), as a user would save it.
const EXAMPLE = `
import { CodeBox, ExecError } from '@boxlite-ai/boxlite';

async function main() {
  const codebox = new CodeBox({ memoryMib: 512 });
  try {
    const result = await codebox.run(\`
x = sum(range(100))
print(f"Sum of 0-99: {x}")
\`);
    console.log(result);

    try {
      await codebox.run('import nonexistent_module');
    } catch (err) {
      if (err instanceof ExecError) {
        console.error(\`Command failed: \${err.command}\`);
        console.error(\`Exit code: \${err.exitCode}\`);
        console.error(\`Stderr: \${err.stderr}\`);
      }
    }
  } finally {
    await codebox.stop();
  }
}

main();
`;

// The persistent-session example of the issue, as a program: the same output as from Python.
const SESSION_EXAMPLE = `
import { CodeBox } from '@boxlite-ai/boxlite';

const codebox = new CodeBox();
try {
  await codebox.run('import json\\ndef process(data):\\n    return {k: v * 2 for k, v in data.items()}\\n');
  console.log(await codebox.run('output = process({"a": 1, "b": 2, "c": 3})\\nprint(json.dumps(output))'));
} finally {
  await codebox.stop();
}
`;

function runExample(proj, file) {
  const p = new Promise((resolve, reject) => {
    execFile(process.execPath, [file], { cwd: proj, env: { ...process.env, BOXLITE_HOME: home }, timeout: 240_000 }, (err, stdout, stderr) =>
      err ? reject(Object.assign(err, { stdout, stderr })) : resolve({ stdout, stderr }),
    );
  });
  p.catch(() => {}); // awaited by the test
  return p;
}

test('CodeBox', { skip, ...T }, async (t) => {
  const runtime = newRuntime();
  await ensureImage(runtime, 'python:slim');

  // The documented example, in its own process and project; it boots its own box meanwhile.
  // It opens its own default runtime, a local one: not run on a REST runtime (examplesLocal).
  const examplesLocal = localOnly('the example programs open their own default runtime: a local one');
  const proj = fs.mkdtempSync(path.join(os.tmpdir(), 'boxlite-example-'));
  let example, sessionExample;
  if (!REST) {
    fs.writeFileSync(path.join(proj, 'package.json'), JSON.stringify({ name: 'example', private: true, type: 'module' }));
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', `@boxlite-ai/boxlite@file:${pkg}`], { cwd: proj, stdio: 'pipe' });
    fs.writeFileSync(path.join(proj, 'run_code.js'), EXAMPLE);
    fs.writeFileSync(path.join(proj, 'session.js'), SESSION_EXAMPLE);
    example = runExample(proj, 'run_code.js');
    sessionExample = runExample(proj, 'session.js');
  }

  const codebox = new CodeBox({ runtime, memoryMib: 512 });
  t.after(async () => {
    await codebox.stop();
    await runtime.close();
    fs.rmSync(proj, { recursive: true, force: true });
  });

  await t.test('the first run takes over the interpreter the template VM started', { skip: localOnly("prestart: a local template VM parks run()'s interpreter") }, async () => {
    const info = await codebox.getInfo();
    assert.deepEqual(info.prestart, ['python']);
    const ps = await codebox.exec('sh', '-c',
      "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q boxlite-sessio[n] && echo ${p#/proc/}; done; true");
    const parked = ps.stdout.split(/\s+/).filter(Boolean);
    assert.equal(parked.length, 1, ps.stdout);
    assert.equal((await codebox.run('import os; print(os.getpid())')).trim(), parked[0]);
  });

  await t.test('run returns stdout', async () => {
    assert.equal(await codebox.run('import math\nprint(f"Pi is approximately {math.pi}")'), 'Pi is approximately 3.141592653589793\n');
    assert.equal(await codebox.run('print("héllo, wörld ✓")'), 'héllo, wörld ✓\n');
  });

  await t.test('a failing cell rejects with ExecError (exitCode, stderr)', async () => {
    await assert.rejects(codebox.run('raise ValueError("bad input")'), (e) => {
      assert.ok(e instanceof ExecError && e instanceof BoxliteError);
      assert.equal(e.command, 'run()');
      assert.equal(e.exitCode, 1);
      assert.match(e.stderr, /ValueError: bad input/);
      return true;
    });
    await assert.rejects(codebox.run('import sys; sys.exit(7)'), (e) => e instanceof ExecError && e.exitCode === 7);
  });

  await t.test('a cell that runs too long rejects with TimeoutError', async () => {
    await assert.rejects(codebox.run('import time\nprint("start", flush=True)\ntime.sleep(60)', { timeoutSecs: 2 }), (e) => {
      assert.ok(e instanceof TimeoutError);
      assert.equal(e.code, 'timeout');
      assert.equal(e.stdout, 'start\n');
      return true;
    });
    assert.equal(await codebox.run('print(1 + 1)'), '2\n', 'the box still works');
  });

  await t.test('bad input', async () => {
    await assert.rejects(codebox.run(42), { name: 'TypeError', message: /code must be a string/ });
    await assert.rejects(codebox.run('print(1)', { timeoutSecs: -1 }), { code: 'invalid_argument', message: /timeout_secs/ });
    await assert.rejects(codebox.installPackages(), { name: 'TypeError' });
  });

  await t.test('run keeps the interpreter state between calls', async () => {
    await codebox.run('import json\ndef process(data):\n    return {k: v * 2 for k, v in data.items()}\n');
    assert.equal(await codebox.run('output = process({"a": 1, "b": 2, "c": 3})\nprint(json.dumps(output))'), '{"a": 2, "b": 4, "c": 6}\n');
    assert.equal(await codebox.run("if __name__ == '__main__':\n    n = 3\n\n    print(n * 2, end='')"), '6');
  });

  await t.test('runCell: value, streams, exception', async () => {
    let r = await codebox.runCell("import sys\nprint('out')\nprint('err', file=sys.stderr)\n{'answer': 6 * 7}");
    assert.deepEqual(r, { stdout: 'out\n', stderr: 'err\n', value: "{'answer': 42}", error: null, exitCode: 0, timedOut: false, restarted: false, stdoutTruncated: false, stderrTruncated: false });
    r = await codebox.runCell("def check(v):\n    raise ValueError(f'negative: {v}')\ncheck(-1)");
    assert.equal(r.error.type, 'ValueError');
    assert.equal(r.error.message, 'negative: -1');
    assert.match(r.error.traceback, /^Traceback \(most recent call last\):\n {2}File "<cell-\d+>", line 3, in <module>\n/);
    assert.match(r.error.traceback, /ValueError: negative: -1\n$/);
    assert.equal(r.exitCode, 1);
  });

  await t.test('a timeout keeps the state; a cell ignoring the interrupt restarts the session', async () => {
    await codebox.run('x = 1');
    await assert.rejects(codebox.run('while True: pass', { timeoutSecs: 1 }), (e) => e instanceof TimeoutError && !e.restarted && /keeps its state/.test(e.message));
    assert.equal(await codebox.run('print(x)'), '1\n');
    await assert.rejects(codebox.run('import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass', { timeoutSecs: 1 }), (e) => {
      assert.ok(e instanceof TimeoutError && e.restarted);
      assert.match(e.message, /restarted/);
      assert.match(e.message, /gone/);
      return true;
    });
    assert.equal(await codebox.run("print('x' in globals())"), 'False\n');
    assert.ok((await codebox.session()).info().restarts >= 1);
  });

  await t.test('large output', async () => {
    const out = await codebox.run("import sys\nsys.stdout.write('z' * 3_000_000)\nfor i in range(10000): print(i)");
    assert.equal(out.length, 3_000_000 + Array.from({ length: 10000 }, (_, i) => `${i}\n`).join('').length);
    assert.ok(out.endsWith('\n9999\n'));
  });

  await t.test('output past the limit is dropped, and run() says so', async () => {
    const marker = (n) => `\n[output truncated: stdout was longer than ${n} bytes; the rest was dropped]\n`;
    let r = await codebox.runCell("import sys; sys.stdout.write('x' * (70 << 20)); print('e', file=sys.stderr)");
    assert.equal(r.stdout.length, 64 << 20);
    assert.ok(r.stdoutTruncated && !r.stderrTruncated);
    assert.equal(r.stderr, 'e\n');
    r = null;
    assert.equal(await codebox.run("import sys; sys.stdout.write('y' * 5000)", { outputLimitBytes: 1000 }), 'y'.repeat(1000) + marker(1000));
    r = await codebox.runCell("print('small')");
    assert.ok(!r.stdoutTruncated && !r.stderrTruncated);
    const s = await codebox.session();
    const out = await s.run("import sys; sys.stdout.write('y' * 5000); 1/0", { outputLimitBytes: 1000 });
    assert.ok(out.startsWith('y'.repeat(1000) + 'Traceback') && out.endsWith(marker(1000)), out.slice(-200));
  });

  await t.test('stream gives output while the cell runs', async () => {
    const cell = codebox.stream("import sys, time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.3)\nprint('done', file=sys.stderr)\n'v'");
    const chunks = [];
    let early;
    for await (const c of cell) {
      if (early === undefined) early = native.cellResult(cell._h, 0) === native.AGAIN;
      chunks.push(c);
    }
    const r = await cell.result();
    assert.equal(chunks.filter((c) => c.stream === 'stdout').map((c) => c.text).join(''), '0\n1\n2\n');
    assert.equal(chunks.filter((c) => c.stream === 'stderr').map((c) => c.text).join(''), 'done\n');
    assert.ok(early, 'the first chunk arrived only after the cell ended');
    assert.equal(r.value, "'v'");
    assert.equal(r.stdout, '');
  });

  await t.test('independent sessions and reset', async () => {
    await codebox.run("w = 'default'");
    const other = await codebox.newSession();
    try {
      assert.equal(await other.run("print('w' in globals())"), 'False\n');
      assert.equal(await codebox.run('print(w)'), 'default\n');
    } finally {
      other.close();
    }
    await codebox.reset();
    assert.equal(await codebox.run("print('w' in globals())"), 'False\n');
  });

  await t.test('raw session functions check their arguments', async () => {
    const s = await codebox.session();
    assert.equal(JSON.parse(await native.sessionRun(s._h, '6 * 7', null)).value, '42');
    const box = await codebox.getBox();
    assert.throws(() => native.sessionInfo(box._h), { name: 'TypeError', message: /session must be a boxlite session handle/ });
    assert.throws(() => native.cellRead(s._h, 10, 0), { name: 'TypeError', message: /cell must be a boxlite cell handle/ });
    await assert.rejects(native.sessionExec(s._h, '{"argv":["true"]}'), (e) => e.code === 'invalid_argument' && /not a shell one/.test(e.message));
    await assert.rejects(native.sessionNew(box._h, 'ruby', null), (e) => e.code === 'invalid_argument');
    await assert.rejects(codebox.runCell(42), { name: 'TypeError' });
    assert.equal(s.info().kind, 'python');
  });

  await t.test('the session example prints what it prints from Python', { skip: examplesLocal }, async () => {
    const { stdout, stderr } = await sessionExample;
    assert.equal(stdout, '{"a": 2, "b": 4, "c": 6}\n\n', stderr);
  });

  await t.test("BoxLite's documented example runs unchanged", { skip: examplesLocal }, async () => {
    const { stdout, stderr } = await example;
    assert.equal(stdout, 'Sum of 0-99: 4950\n\n');
    assert.match(stderr, /^Command failed: run\(\)$/m);
    assert.match(stderr, /^Exit code: 1$/m);
    assert.match(stderr, /ModuleNotFoundError: No module named 'nonexistent_module'/);
  });
});
