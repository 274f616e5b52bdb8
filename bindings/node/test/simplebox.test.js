'use strict';
// SimpleBox and the streaming Execution against one real alpine box.
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { JsBoxlite, SimpleBox, InteractiveBox, BoxliteError, TimeoutError, ExecError, errorCode } = require('..');
const { ensureImage, missingImage, newRuntime, localOnly, rejection } = require('./helpers');

const skip = missingImage('alpine:latest');
const T = { timeout: 180_000 };

test('SimpleBox', { skip, ...T }, async (t) => {
  const runtime = newRuntime();
  await ensureImage(runtime, 'alpine:latest');
  const box = new SimpleBox({ image: 'alpine:latest', memoryMib: 256, runtime, env: { BOX_VAR: 'from-box' } });
  t.after(async () => {
    await box.stop();
    await runtime.close();
  });

  await t.test('the README example: stdout, stderr, exit code', async () => {
    const result = await box.exec('sh', '-c', 'echo Hello from BoxLite!; echo oops >&2; exit 3');
    assert.equal(result.exitCode, 3);
    assert.equal(result.stdout, 'Hello from BoxLite!\n');
    assert.equal(result.stderr, 'oops\n');
    assert.match(box.id, /^[0-9a-f]{12}$/);
    const info = await box.info();
    assert.equal(info.state.status, 'running');
    assert.equal(info.state.running, true);
    assert.equal(info.memoryMib, 256);
  });

  await t.test("info says the VM's acceleration", { skip: localOnly("the VM's accelerator and warnings are the server's: the REST API does not show them") }, async () => {
    const info = await box.info();
    assert.ok(info.runtime.accel, 'info says which acceleration the box uses');
    const tcgWarned = (info.runtime.warnings || []).some((w) => w.startsWith('tcg:'));
    assert.equal(tcgWarned, info.runtime.accel === 'tcg', 'a TCG box says it is not behind a security boundary');
  });

  await t.test('metrics count execs: the box\'s (its shim\'s) and the runtime\'s', async () => {
    const [b0, r0] = [await box.metrics(), await runtime.metrics()];
    assert.equal((await box.exec('echo', 'hello')).exitCode, 0);
    assert.equal((await box.exec('sh', '-c', 'exit 3')).exitCode, 3, 'a non-zero exit is executed, not an error');
    assert.equal(errorCode(await rejection(box.exec('no-such-command'))), 'not_found');
    const [b1, r1] = [await box.metrics(), await runtime.metrics()];
    assert.equal(b1.commandsExecutedTotal - b0.commandsExecutedTotal, 3);
    assert.equal(b1.execErrorsTotal - b0.execErrorsTotal, 1);
    assert.equal(b1.bytesReceivedTotal - b0.bytesReceivedTotal, 'hello\n'.length);
    assert.equal(r1.totalCommandsExecuted - r0.totalCommandsExecuted, 3);
    assert.equal(r1.totalExecErrors - r0.totalExecErrors, 1);
    assert.ok(r1.numRunningBoxes >= 1 && r1.boxesCreatedTotal >= 1, JSON.stringify(r1));
    assert.ok(b1.memoryBytes > 0 && b1.guestBootDurationMs > 0 && b1.totalCreateDurationMs > 0, JSON.stringify(b1));
    assert.equal(typeof b1.cpuPercent, 'number');
  });

  await t.test('env (trailing object and array form), cwd, user', async () => {
    let r = await box.exec('sh', '-c', 'echo $MY_VAR $BOX_VAR', { MY_VAR: 'custom-value' });
    assert.equal(r.stdout, 'custom-value from-box\n');
    r = await box.exec('env', [], { FOO: 'bar' });
    assert.match(r.stdout, /^FOO=bar$/m);
    r = await box.exec('pwd', [], undefined, { cwd: '/tmp' });
    assert.equal(r.stdout, '/tmp\n');
    r = await box.exec('id', ['-u'], undefined, { user: '1000' });
    assert.equal(r.stdout, '1000\n');
    r = await box.exec('printf', '%s|', 'a b', "it's", '$HOME', ';echo no');
    assert.equal(r.stdout, "a b|it's|$HOME|;echo no|", 'arguments are passed as they are, never through a shell');
  });

  await t.test('a timeout is a result with the output so far, as in BoxLite 0.10', async () => {
    const r = await box.exec('sh', ['-c', 'echo started; sleep 30'], undefined, { timeoutSecs: 1 });
    assert.ok(r.timedOut && [-15, -9].includes(r.exitCode), JSON.stringify(r));
    assert.equal(r.errorMessage, 'exec ["sh","-c","echo started; sleep 30"]: timed out after 1s');
    assert.equal(r.stdout, 'started\n');
    const ex = await box.spawn('sleep', ['30'], { timeoutSecs: 1 });
    const w = await ex.wait();
    assert.ok(w.timedOut && /timed out/.test(w.errorMessage), `wait() has BoxLite's errorMessage: ${JSON.stringify(w)}`);
    ex.close();
    assert.equal((await box.exec('true')).errorMessage, undefined, 'no errorMessage for a normal exit');
  });

  await t.test('a missing command rejects with code not_found', async () => {
    const e = await rejection(box.exec('no-such-command', 'x'));
    assert.ok(e instanceof BoxliteError);
    assert.equal(errorCode(e), 'not_found');
    assert.match(e.message, /no-such-command/);
  });

  await t.test('streams a large output through the async iterator without loss', async () => {
    const b = await box.getBox();
    // 8 MiB of pseudo-random bytes, hashed in the box and here
    const ex = await b.exec('sh', ['-c', 'head -c 8388608 /dev/urandom > /tmp/big && sha256sum /tmp/big >&2 && cat /tmp/big']);
    const h = crypto.createHash('sha256');
    let n = 0;
    let chunks = 0;
    for await (const c of ex.stdout.buffers()) {
      h.update(c);
      n += c.length;
      chunks++;
    }
    const stderr = await ex.stderr.text();
    const x = await ex.wait();
    assert.equal(x.exitCode, 0);
    assert.equal(n, 8 << 20);
    assert.ok(chunks > 1, 'it streamed in pieces');
    assert.equal(h.digest('hex'), stderr.split(' ')[0]);
  });

  await t.test('text chunks, lines, and BoxLite\'s stdout() accessor', async () => {
    const b = await box.getBox();
    let ex = await b.exec('sh', ['-c', 'for i in 1 2 3; do echo line$i; sleep 0.1; done; printf héllo']);
    const chunks = [];
    for await (const c of ex.stdout) chunks.push(c);
    assert.equal(chunks.join(''), 'line1\nline2\nline3\nhéllo');
    assert.ok(chunks.length >= 3, `chunks arrive as they are written: ${JSON.stringify(chunks)}`);
    ex = await b.exec('sh', ['-c', 'echo a; echo b; printf c']);
    const stdout = await ex.stdout(); // BoxLite: execution.stdout() resolves to a line reader
    const lines = [];
    for (let l; (l = await stdout.next()) !== null; ) lines.push(l);
    assert.deepEqual(lines, ['a\n', 'b\n', 'c']);
    assert.equal((await ex.wait()).exitCode, 0);
  });

  await t.test('stderr arrives while the process keeps running', async () => {
    const b = await box.getBox();
    for (let i = 0; i < 3; i++) {
      // The process never ends by itself: stderr must come while it runs.
      const ex = await b.exec('sh', ['-c', 'echo err >&2; sleep 1000; echo out']);
      const first = await ex.stderr[Symbol.asyncIterator]().next();
      assert.equal(first.value, 'err\n');
      ex.close(); // kills it
    }
  });

  await t.test('stdin: write, close, read back', async () => {
    const b = await box.getBox();
    const ex = await b.exec('sh', ['-c', 'read a; echo got:$a; cat | wc -c']);
    const stdin = await ex.stdin();
    await stdin.writeString('hello\n');
    await stdin.write(Buffer.alloc(300000, 120));
    await stdin.close();
    assert.equal(await ex.stdout.text(), 'got:hello\n300000\n');
    assert.equal((await ex.wait()).exitCode, 0);
  });

  await t.test('concurrent execs run at once', async () => {
    // Each exec waits until all 8 have started: run one after another, the
    // first would wait for ever (and time out).
    const dir = `/tmp/conc-${process.pid}-${Date.now()}`;
    const rs = await Promise.all(
      Array.from({ length: 8 }, (_, i) => box.exec('sh', '-c',
        `mkdir -p ${dir}; touch ${dir}/${i}; n=0; until [ $(ls ${dir} | wc -l) -eq 8 ]; do n=$((n+1)); [ $n -lt 1200 ] || exit 99; sleep 0.05; done; ` +
        `echo out${i}; echo err${i} >&2; exit ${i}`)),
    );
    rs.forEach((r, i) => {
      assert.equal(r.stdout, `out${i}\n`);
      assert.equal(r.stderr, `err${i}\n`);
      assert.equal(r.exitCode, i);
    });
    // and concurrent large outputs on both streams
    const big = await Promise.all(
      Array.from({ length: 4 }, () => box.exec('sh', '-c', 'seq 1 40000; seq 1 40000 >&2')),
    );
    const want = Array.from({ length: 40000 }, (_, i) => `${i + 1}\n`).join('');
    for (const r of big) {
      assert.equal(r.stdout, want);
      assert.equal(r.stderr, want);
    }
  });

  await t.test('kill and signal', async () => {
    const b = await box.getBox();
    let ex = await b.exec('sleep', ['30']);
    await ex.signal('SIGTERM');
    let x = await ex.wait();
    assert.equal(x.signal, 15);
    assert.equal(x.exitCode, -15);
    ex = await b.exec('sleep', ['30']);
    await ex.kill();
    x = await ex.wait();
    assert.equal(x.signal, 9);
    const e = await rejection(ex.kill());
    assert.equal(e.code, 'invalid_state', 'a finished execution says so');
    await assert.rejects(ex.signal('SIGNOPE'), { name: 'TypeError', message: /signal must be/ });
    ex = await b.exec('sleep', ['30']);
    await assert.rejects(ex.resize(24, 80), (err) => err.code === 'invalid_state');
    ex.close();
  });

  await t.test('a terminal: tty exec sized, resized, typed at; execution ids', async () => {
    const b = await box.getBox();
    const ex = await b.exec({ argv: ['sh'], tty: true, rows: 30, cols: 100 });
    assert.match(await ex.id(), /^[0-9a-f]{12}$/);
    const out = [];
    const seen = async (rx) => {
      for (const deadline = Date.now() + 30_000; Date.now() < deadline; ) {
        const chunk = await ex.stdout.next();
        if (chunk === null) break;
        out.push(chunk);
        if (rx.test(out.join(''))) return;
      }
      assert.fail(`never saw ${rx}: ${JSON.stringify(out.join(''))}`);
    };
    await ex.stdin.write('stty size; tty\n');
    await seen(/^30 100\r?$/m);
    await seen(/^\/dev\/pts\/\d+\r?$/m);
    await ex.resizeTty(40, 120);
    await ex.stdin.write('stty size; exit 7\n');
    await seen(/^40 120\r?$/m);
    assert.equal((await ex.wait()).exitCode, 7);
    const other = await b.exec('true');
    assert.notEqual(await other.id(), await ex.id());
    await other.wait();
    // Collected with a terminal: everything arrives on stdout, CRLF line ends.
    const r = await box.exec('sh', ['-c', 'echo out; echo err >&2'], null, { tty: true });
    assert.equal(r.stdout, 'out\r\nerr\r\n');
    assert.equal(r.stderr, '');
    await assert.rejects(b.exec({ argv: ['true'], rows: 10 }), (e) => e.code === 'invalid_argument' && /tty/.test(e.message));
  });

  await t.test('wrong types are TypeErrors naming the parameter', async () => {
    await assert.rejects(box.exec(42), { name: 'TypeError', message: /cmd must be a string/ });
    await assert.rejects(box.exec('echo', 'a', 7), { name: 'TypeError', message: /args\[1\] must be a string/ });
    await assert.rejects(box.exec('echo', ['a'], { A: 1 }), { name: 'TypeError', message: /env\["A"\] must be a string/ });
    await assert.rejects(box.exec('echo', [], undefined, { timeoutSecs: 'x' }), { name: 'TypeError', message: /timeoutSecs/ });
    await assert.rejects(box.exec('echo', [], undefined, { cwdd: '/' }), { name: 'TypeError', message: /cwdd is not a known option/ });
    const b = await box.getBox();
    await assert.rejects(b.exec('echo', 'notanarray'), { name: 'TypeError', message: /args must be an array/ });
    assert.throws(() => new SimpleBox({ memoryMib: '512' }), { name: 'TypeError', message: /memoryMib must be an integer/ });
    // A value out of range is the library's to refuse, as in every binding.
    await assert.rejects(new SimpleBox({ image: 'alpine:latest', cpus: 0, runtime }).getId(), { code: 'invalid_argument', message: /cpus 0 is outside/ });
    assert.throws(() => new SimpleBox({ imagee: 'x' }), { name: 'TypeError', message: /imagee is not a known option/ });
    assert.throws(() => new SimpleBox({ volumes: ['/tmp:/data'] }), { name: 'TypeError', message: /volumes\[0\]/ });
    assert.throws(() => new SimpleBox({ volumes: [{ hostPath: '/tmp', guestPath: '/data', readOnly: 'yes' }] }), { name: 'TypeError', message: /readOnly/ });
    assert.throws(() => new InteractiveBox({ tty: 'yes' }), { name: 'TypeError', message: /options.tty must be a boolean/ });
    const ex = await b.exec('cat', [], undefined);
    await assert.rejects(ex.stdin.write(12), { name: 'TypeError' });
    ex.close();
    await assert.rejects(ex.wait(), (e) => e.code === 'closed');
  });

  await t.test('huge arguments are refused with a typed error', async () => {
    const e = await rejection(box.exec('echo', 'x'.repeat(8 << 20)));
    assert.ok(e instanceof BoxliteError, `${e}`);
    assert.ok(['limit', 'invalid_argument'].includes(e.code), e.code);
    const r = await box.exec('echo', 'still alive');
    assert.equal(r.stdout, 'still alive\n');
  });

  await t.test('InteractiveBox without a terminal', async () => {
    const ib = new InteractiveBox({ runtime, image: 'alpine:latest', memoryMib: 256 });
    // no second boot: drive the shell of our box through the same API
    ib._boxPromise = box.getBox();
    ib.stop = async () => ib._execution?.close();
    await ib.start();
    await ib.write('echo $((6*7)); exit 5\n');
    assert.equal(await ib.execution.stdout.text(), '42\n');
    assert.equal((await ib.wait()).exitCode, 5);
    await ib.stop();
  });

  await t.test('InteractiveBox.exec runs in a live shell', async () => {
    const ib = new InteractiveBox({ runtime, image: 'alpine:latest', memoryMib: 256 });
    ib._boxPromise = box.getBox(); // no second boot
    try {
      assert.equal((await ib.exec('cd', '/tmp')).exitCode, 0);
      assert.equal((await ib.exec('export', 'A=1')).exitCode, 0);
      assert.deepEqual(await ib.exec('sh', '-c', 'pwd; echo $A'), { exitCode: 0, stdout: '/tmp\n1\n', stderr: '', stdoutTruncated: false, stderrTruncated: false });
      await ib.exec('eval', 'B=two');
      assert.equal((await ib.exec('eval', 'echo "$B"')).stdout, 'two\n');
      assert.equal((await ib.exec('echo', '$A', "it's", 'a;b')).stdout, "$A it's a;b\n", 'arguments are words');
      assert.deepEqual(await ib.exec('sh', '-c', 'printf out; printf err >&2; exit 4'), { exitCode: 4, stdout: 'out', stderr: 'err', stdoutTruncated: false, stderrTruncated: false });
      assert.equal((await ib.exec('sh', '-c', 'echo $C', { C: 'once' })).stdout, 'once\n');
      assert.equal((await ib.exec('sh', '-c', 'echo "[$C]"')).stdout, '[]\n');
      const to = await ib.exec('sh', ['-c', 'echo before; sleep 30'], null, { timeoutSecs: 1 });
      assert.ok(to.timedOut && to.exitCode !== 0 && /timed out after 1s/.test(to.errorMessage) && to.stdout === 'before\n', JSON.stringify(to));
      await assert.rejects((await ib.shellSession()).exec(['sleep', '30'], { timeoutSecs: 1 }), (e) => e instanceof TimeoutError, 'the session itself rejects');
      assert.equal((await ib.exec('pwd')).stdout, '/tmp\n', 'the timeout kept the shell');
      assert.equal((await ib.shellSession()).info().restarts, 0);
      await ib.reset();
      assert.equal((await ib.exec('pwd')).stdout, '/\n');
    } finally {
      (await ib.shellSession()).close();
    }
  });

  await t.test('a stopped box says so, and stop is idempotent', async () => {
    const b = await box.getBox();
    await box.stop();
    await box.stop();
    await assert.rejects(box.exec('true'), (e) => e instanceof BoxliteError && e.code === 'invalid_state');
    await assert.rejects(b.exec('true', []), (e) => e instanceof BoxliteError && ['invalid_state', 'closed'].includes(e.code));
    assert.ok(!(await runtime.listInfo()).some((i) => i.id === b.id), 'autoRemove removed it');
  });
});

test('ExecError carries command, exit code and stderr', () => {
  const e = new ExecError('run()', 2, 'boom');
  assert.ok(e instanceof BoxliteError && e instanceof Error);
  assert.equal(e.command, 'run()');
  assert.equal(e.exitCode, 2);
  assert.equal(e.stderr, 'boom');
  assert.equal(e.name, 'ExecError');
});
