// E2B's documented code interpreter examples, unchanged, with E2B's own
// @e2b/code-interpreter SDK from npm against `boxlite serve` (E2B_API_URL,
// E2B_SANDBOX_URL, E2B_API_KEY from tests/e2b). One sandbox for them all.
// Prints ALL OK.
import assert from 'node:assert/strict'
import { Sandbox } from '@e2b/code-interpreter'

let t = performance.now()
const lap = () => {
  const now = performance.now()
  const d = ((now - t) / 1000).toFixed(1)
  t = now
  return `(${d} s)`
}

const sbx = await Sandbox.create() // the template code-interpreter-v1
console.log('created', sbx.sandboxId, lap())

// state across cells, the last expression's value
await sbx.runCode('x = 1')
let execution = await sbx.runCode('x+=1; x')
assert.equal(execution.text, '2')
assert.equal(execution.results[0].text, '2')
assert.ok(execution.results[0].isMainResult)
assert.equal(execution.error, undefined)
console.log('runCode ok', lap())

// streaming: onStdout, onStderr, onResult
const out = [], err = [], res = []
execution = await sbx.runCode("import sys\nprint('hello world')\nprint('oops', file=sys.stderr)\n'done'", {
  onStdout: (data) => out.push(data),
  onStderr: (data) => err.push(data),
  onResult: (result) => res.push(result),
})
assert.equal(out.map((m) => m.line).join(''), 'hello world\n')
assert.equal(err.map((m) => m.line).join(''), 'oops\n')
assert.deepEqual(res.map((r) => r.text), ['done'])
assert.deepEqual(execution.logs.stdout, ['hello world\n'])
console.log('onStdout ok', lap())

// a matplotlib chart
execution = await sbx.runCode(`
import matplotlib.pyplot as plt

plt.plot([1, 2, 3, 4])
plt.ylabel('some numbers')
plt.show()
`)
const png = Buffer.from(execution.results[0].png, 'base64')
assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
assert.ok(execution.results[0].formats().includes('png'))
console.log('matplotlib ok', png.length, 'bytes', lap())

// errors as data
execution = await sbx.runCode('1/0')
assert.equal(execution.error.name, 'ZeroDivisionError')
assert.equal(execution.error.value, 'division by zero')
assert.match(execution.error.traceback, /ZeroDivisionError/)
const errors = []
await sbx.runCode("raise ValueError('bad')", { onError: (e) => errors.push(e) })
assert.deepEqual(errors.map((e) => e.name), ['ValueError'])
console.log('errors ok', lap())

// JavaScript and bash contexts keep their state
execution = await sbx.runCode("console.log('Hello World'); 40 + 2", { language: 'js' })
assert.deepEqual(execution.logs.stdout, ['Hello World\n'])
assert.equal(execution.text, '42')
const js = await sbx.createCodeContext({ language: 'js' })
assert.equal(js.language, 'javascript')
await sbx.runCode('let n = 40', { context: js })
assert.equal((await sbx.runCode('n + 2', { context: js })).text, '42')
const sh = await sbx.createCodeContext({ language: 'bash', cwd: '/tmp' })
await sbx.runCode('GREETING=hello', { context: sh })
execution = await sbx.runCode('echo "$GREETING from $PWD"', { context: sh })
assert.deepEqual(execution.logs.stdout, ['hello from /tmp\n'])
console.log('js + bash ok', lap())

// a python context of its own: cwd, list, restart, remove
const context = await sbx.createCodeContext()
assert.equal(context.cwd, '/home/user')
await sbx.runCode('y = 5', { context })
assert.equal((await sbx.runCode('y', { context })).text, '5')
const ids = (await sbx.listCodeContexts()).map((c) => c.id)
for (const c of [context, js, sh]) assert.ok(ids.includes(c.id), c.id)
await sbx.restartCodeContext(context)
assert.equal((await sbx.runCode('y', { context })).error.name, 'NameError')
await sbx.restartCodeContext(js.id)
assert.equal((await sbx.runCode('typeof n', { context: js })).text, 'undefined')
await sbx.removeCodeContext(sh)
assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === sh.id))
assert.equal((await sbx.runCode('x')).text, '2')
console.log('contexts ok', lap())

await sbx.kill()
assert.equal(await sbx.isRunning(), false)
console.log('kill ok', lap())
console.log('ALL OK')
