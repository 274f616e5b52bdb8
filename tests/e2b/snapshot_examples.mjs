// E2B's snapshots (https://e2b.dev/docs/sandbox/snapshots) with E2B's JS SDK
// (npm `e2b`) against `boxlite serve` (E2B_API_URL, E2B_SANDBOX_URL,
// E2B_API_KEY; OTHER_API_KEY is a second key of the server's, E2B_KEY_NAME
// the first key's name, the namespace of its named snapshots). Prints ALL OK.
import assert from 'node:assert/strict'
import { Sandbox, SandboxError, SandboxNotFoundError } from 'e2b'

const t0 = performance.now()
const lap = () => `(${((performance.now() - t0) / 1000).toFixed(1)} s in all)`
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const other = { apiKey: process.env.OTHER_API_KEY }

const waitFile = async (sbx, path) => {
  for (let i = 0; i < 100; i++) {
    if (await sbx.files.exists(path)) return
    await sleep(100)
  }
  throw new Error(`${path} did not appear`)
}

// A process holding a value in memory only; SIGUSR1 writes value + 1.
const sandbox = await Sandbox.create({ timeoutMs: 600_000 })
await sandbox.files.write('/root/js.txt', 'first build')
await sandbox.commands.run(
  `sh -c 'x=$(head -c 4 /dev/urandom | od -An -tu4 | tr -d " "); echo $$ > /tmp/pid; echo $x > /tmp/x; ` +
    `trap "echo \\$((x+1)) > /tmp/answer" USR1; while :; do sleep 1; done'`,
  { background: true },
)
await waitFile(sandbox, '/tmp/pid')
const x = Number((await sandbox.files.read('/tmp/x')).trim())
await sandbox.files.remove('/tmp/x')
console.log('source ready', sandbox.sandboxId, lap())

// A named snapshot: NAMESPACE/NAME:default; taken again under its name, it
// is a new build of the same snapshot id.
const snap = await sandbox.createSnapshot({ name: 'js-snap' })
assert.equal(snap.snapshotId, `${process.env.E2B_KEY_NAME}/js-snap:default`)
await sandbox.files.write('/root/js.txt', 'second build')
const again = await sandbox.createSnapshot({ name: 'js-snap' })
assert.equal(again.snapshotId, snap.snapshotId)
assert.deepEqual((await sandbox.listSnapshots().nextItems()).map((s) => s.snapshotId), [snap.snapshotId])
await sandbox.kill()
console.log('createSnapshot ok', snap.snapshotId, lap())

// A sandbox from it by its name: the latest build, its process running.
const c = await Sandbox.create('js-snap', { timeoutMs: 300_000 })
assert.equal(await c.files.read('/root/js.txt'), 'second build')
assert.ok(!(await c.files.exists('/tmp/x')))
await c.commands.run('kill -USR1 $(cat /tmp/pid)')
await waitFile(c, '/tmp/answer')
assert.equal(Number((await c.files.read('/tmp/answer')).trim()), x + 1)
assert.notEqual((await c.commands.run('hostname')).stdout.trim(), '')
console.log('sandbox from the snapshot ok', c.sandboxId, lap())

// Another key sees none of it.
assert.deepEqual(await Sandbox.listSnapshots(other).nextItems(), [])
assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId, other), false)
await assert.rejects(Sandbox.create(snap.snapshotId, other), (e) => e instanceof SandboxError && /not found/.test(e.message))
await assert.rejects(Sandbox.createSnapshot(c.sandboxId, other), SandboxNotFoundError)
// Bad ids are E2B's errors.
await assert.rejects(Sandbox.deleteSnapshot('../../etc'), (e) => e instanceof SandboxError && /want a snapshot/.test(e.message))
console.log('another key, bad ids ok', lap())

// list, delete
assert.ok((await Sandbox.listSnapshots().nextItems()).some((s) => s.snapshotId === snap.snapshotId))
assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false)
assert.ok(!(await Sandbox.listSnapshots().nextItems()).some((s) => s.snapshotId === snap.snapshotId))
await assert.rejects(Sandbox.create('js-snap'), SandboxError)
assert.equal((await c.commands.run('cat /root/js.txt')).stdout, 'second build')
await c.kill()
console.log('list + delete ok', lap())
console.log('ALL OK')
