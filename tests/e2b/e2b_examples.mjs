// E2B's documented examples with E2B's JS SDK (npm `e2b`), unchanged,
// against `boxlite serve` (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY from
// tests/e2b). Prints ALL OK.
import { execFileSync } from 'node:child_process'
import assert from 'node:assert/strict'
import { Sandbox, CommandExitError, FileNotFoundError, SandboxError, SandboxNotFoundError, TimeoutError } from 'e2b'

let t = performance.now()
const lap = () => {
  const now = performance.now()
  const d = ((now - t) / 1000).toFixed(1)
  t = now
  return `(${d} s)`
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

const sandbox = await Sandbox.create()
console.log('created', sandbox.sandboxId, lap())

// commands.run with onStdout
const seen = []
let result = await sandbox.commands.run('echo hi', { onStdout: (data) => seen.push(data) })
assert.equal(result.stdout, 'hi\n')
assert.equal(result.exitCode, 0)
assert.equal(seen.join(''), 'hi\n')
result = await sandbox.commands.run('echo err >&2; echo $FOO', { envs: { FOO: 'bar' } })
assert.equal(result.stdout, 'bar\n')
assert.equal(result.stderr, 'err\n')
await assert.rejects(sandbox.commands.run('exit 3'), (e) => e instanceof CommandExitError && e.exitCode === 3)
console.log('commands.run ok', lap())

// a background command, then kill
const command = await sandbox.commands.run('sleep 600', { background: true })
assert.ok((await sandbox.commands.list()).some((p) => p.pid === command.pid), 'the background command is not listed')
assert.ok(await command.kill())
let gone = false
for (let i = 0; i < 100 && !gone; i++) {
  gone = !(await sandbox.commands.list()).some((p) => p.pid === command.pid)
  if (!gone) await sleep(100)
}
assert.ok(gone, 'the killed command is still listed')
console.log('background + kill ok', lap())

// files
await sandbox.files.write('/home/e2b-test/hello.txt', 'hello world')
assert.equal(await sandbox.files.read('/home/e2b-test/hello.txt'), 'hello world')
const bin = new Uint8Array(3000).map((_, i) => i % 3)
await sandbox.files.write('/home/e2b-test/data.bin', bin.buffer)
assert.deepEqual(await sandbox.files.read('/home/e2b-test/data.bin', { format: 'bytes' }), bin)
const entries = Object.fromEntries((await sandbox.files.list('/home/e2b-test')).map((e) => [e.name, e]))
assert.deepEqual(Object.keys(entries).sort(), ['data.bin', 'hello.txt'])
assert.equal(entries['data.bin'].size, 3000)
assert.ok(await sandbox.files.exists('/home/e2b-test/hello.txt'))
assert.ok(!(await sandbox.files.exists('/home/e2b-test/nope')))
assert.ok(await sandbox.files.makeDir('/home/e2b-test/sub'))
await sandbox.files.rename('/home/e2b-test/data.bin', '/home/e2b-test/sub/data.bin')
assert.ok((await sandbox.files.list('/home/e2b-test', { depth: 2 })).some((e) => e.path === '/home/e2b-test/sub/data.bin'))
await sandbox.files.remove('/home/e2b-test/sub')
assert.ok(!(await sandbox.files.exists('/home/e2b-test/sub')))
await assert.rejects(sandbox.files.read('/home/e2b-test/nope'), FileNotFoundError)
console.log('files ok', lap())

// watchDir seeing a write
const events = []
const handle = await sandbox.files.watchDir('/home/e2b-test', (ev) => events.push([ev.name, ev.type]))
await sandbox.files.write('/home/e2b-test/watched.txt', 'watch me')
for (let i = 0; i < 60 && !events.some(([n]) => n === 'watched.txt'); i++) await sleep(250)
await handle.stop()
assert.ok(events.some(([n]) => n === 'watched.txt'), JSON.stringify(events))
assert.ok(!events.some(([n]) => n.includes('.boxlite-copy-')), JSON.stringify(events))
console.log('watchDir ok', JSON.stringify(events), lap())

// pty.create and sendInput
const out = []
const terminal = await sandbox.pty.create({ cols: 80, rows: 24, onData: (data) => out.push(Buffer.from(data)) })
await sandbox.pty.sendInput(terminal.pid, new TextEncoder().encode('echo pty-$((40+2))\n'))
await sandbox.pty.resize(terminal.pid, { cols: 100, rows: 30 })
await sandbox.pty.sendInput(terminal.pid, new TextEncoder().encode('exit\n'))
await terminal.wait()
assert.ok(Buffer.concat(out).toString().includes('pty-42'), Buffer.concat(out).toString())
console.log('pty ok', lap())

// setTimeout
await sandbox.setTimeout(120_000)
const info = await sandbox.getInfo()
const left = (info.endAt.getTime() - Date.now()) / 1000
assert.ok(left > 100 && left <= 121, `${left}`)
console.log('setTimeout ok', lap())

// Sandbox.connect(id) from a second process
const second = execFileSync(process.execPath, ['--input-type=module', '-e',
  "import { Sandbox } from 'e2b'; const s = await Sandbox.connect(process.argv[1]); console.log((await s.commands.run('cat /home/e2b-test/hello.txt')).stdout)",
  sandbox.sandboxId], { encoding: 'utf8', timeout: 300_000 })
assert.ok(second.includes('hello world'), second)
console.log('connect from a second process ok', lap())

// fork
const [fork1, fork2] = await sandbox.fork({ count: 2, timeoutMs: 120_000 })
for (const f of [fork1, fork2]) {
  assert.ok(f instanceof Sandbox, String(f))
  assert.notEqual(f.sandboxId, sandbox.sandboxId)
  assert.equal(await f.files.read('/home/e2b-test/hello.txt'), 'hello world')
  assert.equal((await f.commands.run('echo fork')).stdout, 'fork\n')
  await f.kill()
}
console.log('fork ok', lap())

// list, kill
const listed = async () => (await Sandbox.list().nextItems()).map((s) => s.sandboxId)
assert.ok((await listed()).includes(sandbox.sandboxId))
assert.ok(await sandbox.isRunning())
await sandbox.kill()
assert.ok(!(await listed()).includes(sandbox.sandboxId))
console.log('kill ok', lap())

// errors as E2B's SDK types them
// (the SDK reads code unavailable on a Start as SandboxNotFoundError, elsewhere as TimeoutError)
await assert.rejects(sandbox.commands.run('echo hi'), SandboxNotFoundError)
await assert.rejects(sandbox.files.read('/home/e2b-test/hello.txt'), TimeoutError)
assert.ok(!(await sandbox.isRunning()))
await assert.rejects(Sandbox.connect(sandbox.sandboxId), SandboxNotFoundError)
await assert.rejects(Sandbox.create('no-such-template'), (e) => e instanceof SandboxError && e.message.includes('no-such-template'))
console.log('errors ok', lap())
console.log('ALL OK')
