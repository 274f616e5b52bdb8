// boxlite session driver for Node: one long-lived interpreter that runs
// cells for the host in its global scope, speaking driver.py's protocol
// (see there and driver.go). Node's standard library only, Node 12+.
//
// Started by internal/session (JavaScriptArgv) as
//     sh -c 'exec node -e BOOT -- SOURCE 3>&1 1>&2'
// so the protocol goes out on fd 3 and requests come in on fd 0; fds 1 and 2
// are the exec's stderr, which the host hands to the running cell (what a
// child process with inherited stdio writes). process.stdout and
// process.stderr write O and E frames instead, so console.log is the cell's
// stdout, in order with its results.
//
// A cell is vm.runInThisContext'ed: its declarations stay in the global
// scope for the next; its completion value (the last expression's), awaited
// when it is a promise, is its value. SIGINT interrupts running code
// (breakOnSigint) or the wait for a promise.
(function () {
  "use strict";
  const fs = require("fs");
  const vm = require("vm");
  const util = require("util");
  const MAGIC = Buffer.from("\x00\x01BOXLITE-SESSION-1\n", "latin1");
  const PROTO = 3;
  const MAX_REQUEST = 256 << 20;
  const MAX_REPR = 1 << 20;
  const MAX_BUNDLE = 8 << 20;
  const DRIVER_FILE = "<boxlite-session>";
  const stringify = JSON.stringify;
  const inspect = util.inspect;
  const env = process.env;

  function writeAll(buf) {
    let off = 0;
    while (off < buf.length) {
      try {
        off += fs.writeSync(PROTO, buf, off, buf.length - off);
      } catch (e) {
        if (e.code !== "EAGAIN") throw e;
      }
    }
  }

  function send(kind, payload) {
    const hdr = Buffer.alloc(5);
    hdr.write(kind, 0, "latin1");
    hdr.writeUInt32BE(payload.length, 1);
    writeAll(Buffer.concat([hdr, payload]));
  }

  function sendJSON(kind, obj) {
    send(kind, Buffer.from(stringify(obj), "utf8"));
  }

  // The cells' stdout and stderr are frames.
  function patch(stream, kind) {
    stream.write = function (chunk, encoding, cb) {
      if (typeof encoding === "function") {
        cb = encoding;
        encoding = undefined;
      }
      const b = Buffer.isBuffer(chunk) ? chunk : chunk instanceof Uint8Array ? Buffer.from(chunk) : Buffer.from(String(chunk), encoding || "utf8");
      for (let off = 0; off < b.length; off += 64 << 10) send(kind, b.subarray(off, off + (64 << 10)));
      if (cb) process.nextTick(cb);
      return true;
    };
  }
  patch(process.stdout, "O");
  patch(process.stderr, "E");

  function plain(v) {
    let r;
    try {
      r = typeof v === "string" ? inspect(v) : inspect(v, { depth: 4 });
    } catch (e) {
      r = "<uninspectable " + typeof v + ">";
    }
    if (r.length > MAX_REPR) r = r.slice(0, MAX_REPR) + "... [" + r.length + " characters]";
    return r;
  }

  let current = null; // the running cell: {id, rich}

  function emit(data, main) {
    if (!current || !current.rich) {
      if (data["text/plain"] !== undefined) process.stdout.write(data["text/plain"] + "\n");
      return;
    }
    let size = 0;
    for (const k of Object.keys(data)) size += Buffer.byteLength(stringify(data[k]), "utf8");
    if (size > MAX_BUNDLE) {
      process.stderr.write("[boxlite: a result of " + size + " bytes dropped: a result holds at most " + MAX_BUNDLE + "]\n");
      data = { "text/plain": data["text/plain"] || "" };
    }
    sendJSON("D", { id: current.id, data: data, main: main });
  }

  // display(value) shows a value as a result of the running cell;
  // display(bundle, {raw: true}) a MIME bundle ({"text/html": "<b>hi</b>"}).
  function display(value, opts) {
    let data;
    if (opts && opts.raw && value && typeof value === "object") {
      data = {};
      for (const k of Object.keys(value)) {
        const v = value[k];
        if (typeof v === "string") data[k] = v;
        else if (k === "application/json") data[k] = v;
        else if (Buffer.isBuffer(v)) data[k] = v.toString("base64");
      }
    } else {
      data = { "text/plain": plain(value) };
    }
    emit(data, false);
  }
  Object.defineProperty(globalThis, "display", { value: display, writable: true, configurable: true });

  function describe(e) {
    if (e instanceof Error || (e && typeof e === "object" && "stack" in e)) {
      const name = e.name || (e.constructor && e.constructor.name) || "Error";
      const lines = String(e.stack || name + ": " + e.message).split("\n");
      // The driver's own frames, and Node's below them, go.
      const kept = lines.filter((l) => !l.includes(DRIVER_FILE) && !/^\s+at .*(node:internal|\(node:|vm\.js)/.test(l));
      return { type: name, message: String(e.message === undefined ? "" : e.message), traceback: kept.join("\n") + "\n" };
    }
    const s = plain(e);
    return { type: "Error", message: s, traceback: "Uncaught " + s + "\n" };
  }

  let rejectWait = null; // rejects the wait for a cell's promise

  process.on("SIGINT", function () {
    if (rejectWait) {
      const err = new Error("Script execution interrupted.");
      err.code = "ERR_SCRIPT_EXECUTION_INTERRUPTED";
      rejectWait(err);
    }
  });
  process.on("uncaughtException", function (e) {
    process.stderr.write("Uncaught " + describe(e).traceback);
  });
  process.on("unhandledRejection", function (e) {
    process.stderr.write("Unhandled rejection: " + describe(e).traceback);
  });

  function compile(code, filename) {
    try {
      return new vm.Script(code, { filename: filename });
    } catch (e) {
      // top-level await: the cell runs in an async function (its
      // declarations then stay in it, and its value is what it returns)
      if (e instanceof SyntaxError && /await/.test(code)) {
        try {
          return new vm.Script("(async () => {\n" + code + "\n})()", { filename: filename, lineOffset: -1 });
        } catch (e2) {
          throw e;
        }
      }
      throw e;
    }
  }

  async function run(msg) {
    const id = msg.id | 0;
    const result = { id: id, value: null, error: null, exit_code: 0 };
    const saved = {};
    const cellEnv = msg.env && typeof msg.env === "object" ? msg.env : {};
    for (const k of Object.keys(cellEnv)) {
      saved[k] = Object.prototype.hasOwnProperty.call(env, k) ? env[k] : undefined;
      env[k] = String(cellEnv[k]);
    }
    current = { id: id, rich: msg.rich === true };
    sendJSON("S", { id: id });
    try {
      let value = compile(String(msg.code || ""), "<cell-" + id + ">").runInThisContext({ breakOnSigint: true, displayErrors: false });
      if (value && typeof value.then === "function") {
        value = await new Promise(function (resolve, reject) {
          rejectWait = reject;
          value.then(resolve, reject);
        });
      }
      if (value !== undefined) {
        globalThis._ = value;
        const text = plain(value);
        result.value = text;
        if (current.rich) emit({ "text/plain": text }, true);
      }
    } catch (e) {
      result.error = describe(e);
      result.exit_code = e && e.code === "ERR_SCRIPT_EXECUTION_INTERRUPTED" ? 130 : 1;
      if (result.exit_code === 130) result.error.type = "KeyboardInterrupt";
    } finally {
      rejectWait = null;
      current = null;
      for (const k of Object.keys(saved)) {
        if (saved[k] === undefined) delete env[k];
        else env[k] = saved[k];
      }
    }
    sendJSON("R", result);
  }

  // Requests: a 4-byte big-endian length and JSON, one at a time.
  let buf = Buffer.alloc(0);
  let busy = false;
  const queue = [];
  async function pump() {
    if (busy) return;
    busy = true;
    while (queue.length) {
      const body = queue.shift();
      let msg;
      try {
        msg = JSON.parse(body.toString("utf8"));
      } catch (e) {
        sendJSON("X", { message: "bad request: " + e.message });
        continue;
      }
      if (msg && msg.op === "run") await run(msg);
      else if (msg && msg.op === "hello") hello();
      else sendJSON("X", { message: "unknown op " + stringify(msg && msg.op) });
    }
    busy = false;
  }
  process.stdin.on("data", function (chunk) {
    buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
    while (buf.length >= 4) {
      const n = buf.readUInt32BE(0);
      if (n > MAX_REQUEST) {
        sendJSON("X", { message: "request of " + n + " bytes exceeds " + MAX_REQUEST });
        process.exit(0);
      }
      if (buf.length < 4 + n) break;
      queue.push(buf.subarray(4, 4 + n));
      buf = buf.subarray(4 + n);
    }
    pump();
  });
  process.stdin.on("end", function () {
    process.exit(0);
  });

  // The magic and hello: at the start, and again when a session that takes
  // over this interpreter asks (op "hello").
  function hello() {
    writeAll(MAGIC);
    sendJSON("H", { version: 1, pid: process.pid, python: process.version, executable: process.execPath });
  }
  hello();
})();
