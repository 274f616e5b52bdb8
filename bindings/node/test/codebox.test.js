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
const { pkg, home, ensureImage, missingImage } = require('./helpers');

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

test('CodeBox', { skip, ...T }, async (t) => {
  const runtime = new JsBoxlite({ homeDir: home });
  await ensureImage(runtime, 'python:slim');

  // The documented example, in its own process and project; it boots its own box meanwhile.
  const proj = fs.mkdtempSync(path.join(os.tmpdir(), 'boxlite-example-'));
  fs.writeFileSync(path.join(proj, 'package.json'), JSON.stringify({ name: 'example', private: true, type: 'module' }));
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', `@boxlite-ai/boxlite@file:${pkg}`], { cwd: proj, stdio: 'pipe' });
  fs.writeFileSync(path.join(proj, 'run_code.js'), EXAMPLE);
  const example = new Promise((resolve, reject) => {
    execFile(process.execPath, ['run_code.js'], { cwd: proj, env: { ...process.env, BOXLITE_HOME: home }, timeout: 240_000 }, (err, stdout, stderr) =>
      err ? reject(Object.assign(err, { stdout, stderr })) : resolve({ stdout, stderr }),
    );
  });
  example.catch(() => {}); // awaited below

  const codebox = new CodeBox({ runtime, memoryMib: 512 });
  t.after(async () => {
    await codebox.stop();
    await runtime.close();
    fs.rmSync(proj, { recursive: true, force: true });
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
    const t0 = Date.now();
    await assert.rejects(codebox.run('import time\nprint("start", flush=True)\ntime.sleep(60)', { timeoutSecs: 2 }), (e) => {
      assert.ok(e instanceof TimeoutError);
      assert.equal(e.code, 'timeout');
      assert.equal(e.stdout, 'start\n');
      return true;
    });
    assert.ok(Date.now() - t0 < 20_000);
    assert.equal(await codebox.run('print(1 + 1)'), '2\n', 'the box still works');
  });

  await t.test('bad input', async () => {
    await assert.rejects(codebox.run(42), { name: 'TypeError', message: /code must be a string/ });
    await assert.rejects(codebox.run('print(1)', { timeoutSecs: -1 }), { name: 'RangeError' });
    await assert.rejects(codebox.installPackages(), { name: 'TypeError' });
  });

  await t.test("BoxLite's documented example runs unchanged", async () => {
    const { stdout, stderr } = await example;
    assert.equal(stdout, 'Sum of 0-99: 4950\n\n');
    assert.match(stderr, /^Command failed: run\(\)$/m);
    assert.match(stderr, /^Exit code: 1$/m);
    assert.match(stderr, /ModuleNotFoundError: No module named 'nonexistent_module'/);
  });
});
