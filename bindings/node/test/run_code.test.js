'use strict';
// CodeBox.runCode on python:slim (with nodejs and matplotlib:
// tests/images/python-rootfs.sh): rich results in python, javascript and bash
// contexts, errors, timeouts, restart.
const test = require('node:test');
const assert = require('node:assert/strict');
const { CodeBox, CodeContext, CodeExecution, TimeoutError } = require('..');
const { newRuntime, ensureImage, missingImage, rejection } = require('./helpers');

const skip = missingImage('python:slim');
const T = { timeout: 300_000 };

test('CodeBox.runCode', { skip, ...T }, async (t) => {
  const runtime = newRuntime();
  await ensureImage(runtime, 'python:slim');
  const cb = new CodeBox({ runtime, memoryMib: 512 });
  t.after(async () => {
    await cb.stop();
    await runtime.close();
  });

  await t.test('python: value, state, count, error', async () => {
    await cb.runCode('x = 1');
    const r = await cb.runCode('x + 1');
    assert.ok(r instanceof CodeExecution);
    assert.equal(r.text, '2');
    assert.equal(r.results[0].text, '2');
    assert.equal(r.results[0].isMainResult, true);
    assert.equal(r.executionCount, 2);
    const e = await cb.runCode("print('out')\n1/0");
    assert.equal(e.error.name, 'ZeroDivisionError');
    assert.match(e.error.traceback, /1\/0/);
    assert.deepEqual(e.logs.stdout, ['out\n']);
  });

  await t.test('python: rich results and a figure', async () => {
    const r = await cb.runCode(
      "class T:\n    def _repr_html_(self): return '<b>t</b>'\ndisplay(T())\n" +
        'import matplotlib.pyplot as plt\nplt.plot([1, 2])\nNone',
    );
    assert.equal(r.error, undefined, JSON.stringify(r.error));
    assert.deepEqual(r.results.map((x) => x.formats()), [['text', 'html'], ['text', 'png']]);
    assert.equal(r.results[0].html, '<b>t</b>');
    assert.ok(Buffer.from(r.results[1].png, 'base64').subarray(0, 4).equals(Buffer.from('\x89PNG', 'latin1')));
  });

  await t.test('javascript and bash keep state', async () => {
    await cb.runCode('const n = 40', { language: 'javascript' });
    const r = await cb.runCode("console.log('js'); n + 2", { language: 'js' });
    assert.equal(r.text, '42');
    assert.deepEqual(r.logs.stdout, ['js\n']);
    await cb.runCode('cd /tmp; V=7', { language: 'bash' });
    const b = await cb.runCode('echo $V $PWD', { language: 'bash' });
    assert.deepEqual(b.logs.stdout, ['7 /tmp\n']);
    assert.equal((await cb.runCode('exit 3', { language: 'bash' })).error.name, 'ExitCode');
  });

  await t.test('a context: timeout keeps state, restart clears it', async () => {
    const ctx = await cb.createCodeContext('python');
    assert.ok(ctx instanceof CodeContext);
    await cb.runCode('y = 5', { context: ctx });
    const err = await rejection(ctx.runCode('import time\ntime.sleep(60)', { timeoutSecs: 2 }));
    assert.ok(err instanceof TimeoutError, String(err));
    assert.equal(err.execution.timedOut, true);
    assert.equal((await ctx.runCode('y')).text, '5');
    await ctx.restart();
    const r = await ctx.runCode('y');
    assert.equal(r.error.name, 'NameError');
    assert.equal(r.executionCount, 1);
    await assert.rejects(cb.runCode('1', { language: 'cobol' }), TypeError);
    await assert.rejects(cb.runCode('1', { bogus: 1 }), TypeError);
  });
});
