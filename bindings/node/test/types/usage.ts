// Type-checked only (`tsc -p test/types`, in `make test`): BoxLite programs'
// uses of the API must compile against lib/index.d.ts; the @ts-expect-error
// lines must not. test/dts.test.js checks the declarations against the code.
import {
  Boxlite, JsBoxlite, JsBox, JsExecution, SimpleBox, CodeBox, InteractiveBox,
  BoxliteError, ExecError, TimeoutError, errorCode, version,
  type BoxliteErrorCode, type ExitStatus, type ExecResult, type JsBoxInfo, type CellResult,
  type BoxMetrics, type RuntimeMetrics, type JsSnapshotInfo, Secret, SecurityOptions, type JsHealthState,
} from 'boxlite-go';

export async function simple(): Promise<string> {
  const box = new SimpleBox({ image: 'alpine:latest', memoryMib: 256, cpus: 1, autoRemove: true });
  try {
    const r: ExecResult = await box.exec('echo', 'Hello from BoxLite!');
    const r2 = await box.exec('sh', ['-c', 'echo $A'], { A: '1' }, { timeoutSecs: 5, tty: true, rows: 30, cols: 100 });
    const r3 = await box.exec('env', { K: 'V' });
    const info: JsBoxInfo = await box.info();
    return r.stdout + r2.stderr + r3.exitCode + info.state + box.id;
  } finally {
    await box.stop();
  }
}

export async function native(): Promise<number> {
  const rt = new JsBoxlite({ homeDir: '/tmp/h' });
  const box: JsBox = await rt.create({ image: 'alpine:latest', network: { mode: 'enabled', allowNet: ['pypi.org'] }, detach: true, entrypoint: ['/bin/sh'], cmd: ['-c', 'true'] }, 'named');
  await box.start();
  const faulted: boolean = (await box.info()).faulted;
  void faulted;
  const ex: JsExecution = await box.exec('sh', [], null, true);
  const ex2 = await box.exec({ argv: ['cat'], stdin: true, tty: true, rows: 24, cols: 80 });
  const id: string = await ex.id();
  await ex.resizeTty(40, 120);
  const stdin = await ex.stdin();
  await stdin.writeString('exit\n');
  for await (const line of await ex.stdout()) console.log(line, id);
  const st: ExitStatus = await ex.wait();
  ex2.close();
  await box.copyIn('/etc/hostname', '/tmp/', { recursive: true, overwrite: true });
  const infos = await rt.listInfo();
  const same: JsBox | null = await rt.get('named');
  await rt.remove(box.id, true);
  await rt.close();
  const def: Boxlite = Boxlite.withDefaultConfig();
  void def; void same;
  return st.exitCode + infos.length;
}

export async function lifecycle(rt: JsBoxlite, box: JsBox): Promise<number> {
  const m: BoxMetrics = await box.metrics();
  const rm: RuntimeMetrics = await rt.metrics();
  await box.stop();
  const snap: JsSnapshotInfo = await box.snapshot.create('before');
  const all: JsSnapshotInfo[] = await box.snapshot.list();
  await box.snapshot.restore(snap.name);
  const clone: JsBox = await box.cloneBox({ snapshot: 'before' }, 'copy');
  const archive: string = await clone.export('/tmp');
  const imported: JsBox = await rt.importBox(archive, 'imported');
  void imported;
  return m.commandsExecutedTotal + rm.boxesCreatedTotal + all.length + m.execErrorsTotal;
}

export async function code(): Promise<string> {
  await using cb = new CodeBox({ memoryMib: 512 });
  await cb.run('x = 1');
  const cell: CellResult = await cb.runCell('print(x)');
  for await (const chunk of cb.stream('print(2)')) console.log(chunk.stream, chunk.text);
  return (await cb.run('print(x + 1)')) + cell.stdout;
}

export async function interactive(): Promise<ExitStatus> {
  const box = new InteractiveBox({ image: 'alpine:latest', shell: '/bin/sh', tty: true });
  try {
    await box.start();
    const tty: boolean = box.tty;
    await box.exec('cd', '/tmp');
    void tty;
    return await box.wait();
  } finally {
    await box.stop();
  }
}

export function errors(e: unknown): string {
  if (e instanceof ExecError) return `${e.command} ${e.exitCode} ${e.stderr}`;
  if (e instanceof TimeoutError) return e.stdout ?? '';
  if (e instanceof BoxliteError) {
    const c: BoxliteErrorCode | undefined = e.code;
    return c ?? '';
  }
  return (errorCode(e) ?? 'none') + version();
}

export async function secrets(): Promise<string> {
  // BoxLite's form (a plain {name, value, hosts}) and the class.
  const key = new Secret({ name: 'openai', value: 'sk-1', hosts: ['api.openai.com'] });
  const box = new SimpleBox({ image: 'python:slim', secrets: [key, { name: 'gh', value: 'ghp-1', hosts: ['api.github.com'], placeholder: 'GH-PLACEHOLDER' }] });
  const info = await box.info();
  return key.getPlaceholder() + (info.secrets ?? []).map((s) => s.name + s.hosts.join(',') + s.placeholder).join();
}

export async function advanced(): Promise<JsHealthState> {
  const security = SecurityOptions.maximum();
  security.maxOpenFiles = 2048;
  const box = new SimpleBox({
    image: 'alpine:latest',
    advanced: { capabilities: { add: ['NET_ADMIN'], drop: ['CHOWN'] } },
    security,
    healthCheck: { interval: 30, timeout: 10, retries: 3, startPeriod: 60 },
  });
  const info = await box.getInfo();
  return info.healthStatus.state;
}

export async function wrong(box: JsBox, ex: JsExecution): Promise<void> {
  // @ts-expect-error capabilities are names
  new SimpleBox({ image: 'alpine:latest', advanced: { capabilities: { add: [12] } } });
  // @ts-expect-error memoryMib is a number
  new SimpleBox({ image: 'alpine:latest', memoryMib: '256' });
  // @ts-expect-error the code is one of the library's kinds
  const c: BoxliteErrorCode = 'no_such_kind';
  // @ts-expect-error resizeTty takes rows and cols
  await ex.resizeTty(40);
  // @ts-expect-error exec's argv is strings
  await box.exec({ argv: [1, 2] });
  void c;
}
