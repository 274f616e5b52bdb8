'use strict';
// Secret: a credential the box uses without holding it (BoxLite's Secret).
// The box sees its placeholder (env BOXLITE_SECRET_<NAME>); the host puts
// the value in HTTPS requests to its hosts. See docs/secrets.md.

class Secret {
  /**
   * @param {{name: string, value: string, hosts?: string[], placeholder?: string}} o
   * hosts is optional as in BoxLite's Secret; the library refuses a box
   * whose secret has none (it would put the value nowhere).
   */
  constructor({ name, value, hosts = [], placeholder, ...rest } = {}) {
    const unknown = Object.keys(rest);
    if (unknown.length) throw new TypeError(`Secret: ${unknown[0]} is not a known option (name, value, hosts, placeholder)`);
    if (typeof name !== 'string' || name === '') throw new TypeError('Secret: name must be a non-empty string');
    if (typeof value !== 'string' || value === '') throw new TypeError('Secret: value must be a non-empty string');
    if (!Array.isArray(hosts) || hosts.some((h) => typeof h !== 'string')) throw new TypeError('Secret: hosts must be an array of strings');
    if (placeholder !== undefined && placeholder !== null && typeof placeholder !== 'string') throw new TypeError('Secret: placeholder must be a string');
    this.name = name;
    this.hosts = [...hosts];
    this.placeholder = placeholder || `<BOXLITE_SECRET:${name}>`;
    // Not enumerable: console.log and JSON.stringify of the Secret leave it out.
    Object.defineProperty(this, 'value', { value, enumerable: false });
  }

  /** What the box sees in the value's place. */
  getPlaceholder() {
    return this.placeholder;
  }

  /** The environment variable the box finds the placeholder in. */
  envKey() {
    return 'BOXLITE_SECRET_' + this.name.replace(/[^A-Za-z0-9_]/g, '_').toUpperCase();
  }

  toJSON() {
    return { name: this.name, hosts: this.hosts, placeholder: this.placeholder };
  }
}

/** secrets: [Secret | {name, value, hosts, placeholder}] → the C ABI's secrets. */
function secretsOption(v, where) {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) throw new TypeError(`${where} must be an array of Secret or {name, value, hosts, placeholder}, got ${typeof v}`);
  return v.map((s, i) => {
    const w = `${where}[${i}]`;
    if (s === null || typeof s !== 'object' || Array.isArray(s)) throw new TypeError(`${w} must be a Secret or {name, value, hosts, placeholder}`);
    if (!(s instanceof Secret)) {
      const known = ['name', 'value', 'hosts', 'placeholder'];
      for (const k of Object.keys(s)) {
        if (!known.includes(k)) throw new TypeError(`${w}.${k} is not a known option (${known.join(', ')})`);
      }
    }
    const sec = s instanceof Secret ? s : (() => {
      try {
        return new Secret(s);
      } catch (e) {
        throw new TypeError(`${w}: ${e.message.replace(/^Secret: /, '')}`);
      }
    })();
    const out = { name: sec.name, value: sec.value, hosts: sec.hosts };
    if (s.placeholder) out.placeholder = sec.placeholder;
    return out;
  });
}

module.exports = { Secret, secretsOption };
