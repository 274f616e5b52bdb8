'use strict';
// A box's network handle (box.network): tunnels to ports in the box, as
// BoxLite's NetworkHandle / BoxTunnel / TunnelForwarder. A tunnel is a TCP
// connection to a port on the box's own loopback carried over the box's
// agent channel: no published port and no network in the box are needed.
const net = require('net');
const path = require('path');
const native = require('./native');
const { BoxliteError } = require('./errors');
const { isPlainObject, directionOption } = require('./options');

function checkPort(port) {
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new BoxliteError('port must be an integer between 1 and 65535', { code: 'invalid_argument' });
  }
  return port;
}

/** BoxLite's SocketAddress ({type: 'tcp', host?, port} | {type: 'unix', path}) as the C ABI's JSON. */
function socketAddressJson(a) {
  if (!isPlainObject(a)) throw new TypeError('listen must be a SocketAddress object: {type: "tcp", host, port} or {type: "unix", path}');
  const keys = a.type === 'unix' ? ['type', 'path'] : ['type', 'host', 'port'];
  for (const k of Object.keys(a)) {
    if (!keys.includes(k)) throw new TypeError(`unknown SocketAddress key ${JSON.stringify(k)} (keys: ${keys.join(', ')})`);
  }
  if (a.type === 'unix') {
    if (typeof a.path !== 'string' || !path.isAbsolute(a.path)) {
      throw new BoxliteError('tunnel Unix socket path must be absolute', { code: 'invalid_argument' });
    }
    return JSON.stringify({ type: 'unix', path: a.path });
  }
  if (a.type !== 'tcp') throw new TypeError(`SocketAddress type ${JSON.stringify(a.type)}: want "tcp" or "unix"`);
  const host = a.host ?? '127.0.0.1';
  if (typeof host !== 'string' || net.isIP(host) === 0) {
    throw new BoxliteError('tunnel listener host must be a numeric IP', { code: 'invalid_argument' });
  }
  const port = a.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new BoxliteError('port must be an integer between 0 and 65535', { code: 'invalid_argument' });
  }
  return JSON.stringify({ type: 'tcp', host, port });
}

/**
 * A connection to a port in the box (BoxLite's NativeBoxConnection):
 * read(maxBytes) resolves to up to that many bytes, an empty Buffer once the
 * box's side has closed or half-closed; write(data) resolves to the bytes
 * written; shutdownWrite() half-closes; close() ends it. `socket` is the
 * net.Socket under it, for code that wants a stream.
 */
class BoxConnection {
  /** @internal */
  constructor(fd, port) {
    this.port = port;
    this.socket = new net.Socket({ fd, readable: true, writable: true, allowHalfOpen: true });
    this.socket.pause();
    this._ended = false;
    this._error = null;
    this._closed = false;
    this.socket.on('end', () => {
      this._ended = true;
    });
    this.socket.on('error', (e) => {
      this._error = e;
    });
  }

  _live() {
    if (this._closed) throw new BoxliteError(`tunnel to port ${this.port}: connection is closed`, { code: 'closed' });
    return this.socket;
  }

  async read(maxBytes = 65536) {
    if (!Number.isInteger(maxBytes)) throw new TypeError('maxBytes must be an integer');
    if (maxBytes <= 0) throw new BoxliteError('maxBytes must be non-zero', { code: 'invalid_argument' });
    const s = this._live();
    for (;;) {
      const chunk = s.read();
      if (chunk !== null) {
        if (chunk.length > maxBytes) {
          s.unshift(chunk.subarray(maxBytes));
          return chunk.subarray(0, maxBytes);
        }
        return chunk;
      }
      if (this._error) throw this._error;
      if (this._ended || s.readableEnded) return Buffer.alloc(0);
      await new Promise((resolve) => {
        const done = () => {
          s.off('readable', done);
          s.off('end', done);
          s.off('error', done);
          s.off('close', done);
          resolve();
        };
        s.on('readable', done);
        s.on('end', done);
        s.on('error', done);
        s.on('close', done);
      });
      if (this._closed) throw new BoxliteError(`tunnel to port ${this.port}: connection is closed`, { code: 'closed' });
      if (s.destroyed && !this._ended && s.readableLength === 0) return Buffer.alloc(0);
    }
  }

  async write(data) {
    if (typeof data === 'string') data = Buffer.from(data);
    if (!Buffer.isBuffer(data) && !(data instanceof Uint8Array)) throw new TypeError('data must be a Buffer, Uint8Array or string');
    const s = this._live();
    await new Promise((resolve, reject) => s.write(data, (err) => (err ? reject(err) : resolve())));
    return data.length;
  }

  async shutdownWrite() {
    const s = this._live();
    await new Promise((resolve) => s.end(resolve));
  }

  async close() {
    if (this._closed) return;
    this._closed = true;
    this.socket.destroy();
  }
}

/** A listener on this host carrying each connection to a port in the box (BoxLite's TunnelForwarder). */
class TunnelForwarder {
  /** @internal */
  constructor(handle, port) {
    this._h = handle;
    this.port = port;
    this._addr = JSON.parse(native.forwarderLocalAddr(handle));
    this._closed = false;
  }

  /** Where it listens: {type: 'tcp', host, port} (port 0 resolved) or {type: 'unix', path}. */
  localAddr() {
    const a = this._addr;
    return a.type === 'unix' ? { type: 'unix', path: a.path } : { type: 'tcp', host: a.host, port: a.port };
  }

  /** Resolves once the forwarder has stopped (close(), or its listener failed: then rejects). */
  async wait() {
    while ((await native.forwarderWait(this._h, 1000)) !== undefined) {
      // BOXLITE_AGAIN: still serving
    }
  }

  async close() {
    if (this._closed) return;
    this._closed = true;
    await native.forwarderClose(this._h);
  }
}

/** A prepared one-shot tunnel to a port in the box: connect() or forward(), once. */
class BoxTunnel {
  /** @internal */
  constructor(box, port) {
    this._box = box;
    this._port = port;
    this._used = false;
  }

  _take(what) {
    if (this._used) {
      throw new BoxliteError(`tunnel to port ${this._port}: ${what}: the tunnel was used already (a tunnel is one-shot)`, { code: 'invalid_state' });
    }
    this._used = true;
  }

  /** Public URL of a remotely served tunnel; null for a local box. */
  uri() {
    return null;
  }

  /** Consumes the tunnel and returns its byte stream. */
  async connect() {
    this._take('connect');
    const fd = await native.boxTunnelConnect(this._box._handle('tunnel.connect'), this._port);
    return new BoxConnection(fd, this._port);
  }

  /** Consumes the tunnel and listens on `listen`, forwarding each connection. */
  async forward(listen) {
    const json = socketAddressJson(listen);
    this._take('forward');
    const h = await native.boxTunnelForward(this._box._handle('tunnel.forward'), this._port, json);
    return new TunnelForwarder(h, this._port);
  }
}

/** box.network (and SimpleBox.network): tunnels to ports in the box. */
class NetworkHandle {
  /** @internal `box` is a function resolving to the Box. */
  constructor(box) {
    this._box = box;
  }

  /** Prepares a one-shot tunnel to a TCP port inside the box. */
  async tunnel(port) {
    checkPort(port);
    return new BoxTunnel(await this._box(), port);
  }

  /**
   * Replaces where the box may connect ({mode: 'enabled', allowNet?} or {mode: 'disabled'}): a running
   * box's network stack enforces it at once for new connections and names; the box keeps it.
   */
  async updateOutbound(spec) {
    const d = directionOption(spec, 'updateOutbound spec');
    const box = await this._box();
    await native.boxUpdateOutbound(box._handle('network.updateOutbound'), JSON.stringify(d));
  }

  /** Replaces the inbound mode (kept and reported); a non-empty allowNet is 'unsupported'. */
  async updateInbound(spec) {
    const d = directionOption(spec, 'updateInbound spec');
    const box = await this._box();
    await native.boxUpdateInbound(box._handle('network.updateInbound'), JSON.stringify(d));
  }

  /** BoxLite withdraws a port's public access; a local box has none: checks the port, does nothing. */
  async revokeTunnel(port) {
    checkPort(port);
  }
}

module.exports = { NetworkHandle, BoxTunnel, TunnelForwarder, BoxConnection, socketAddressJson };
