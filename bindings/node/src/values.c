/*
 * values.c: JS <-> C values for the addon. Arguments are checked here: a
 * value of the wrong type, or a handle of the wrong kind, is a TypeError
 * naming the parameter (code "invalid_argument"); the library checks the
 * rest. Errors are JS Error objects with `code` = boxlite_status_name() of
 * the status ("not_found", "invalid_state", ...) and the library's message.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addon.h"

const char *const kind_names[] = {"", "runtime", "box", "execution", "session", "cell", "forwarder"};

static const napi_type_tag kind_tags[] = {
    {0, 0},
    {0xb0c5117e00000001ULL, 0x7a6e3f0a1c2d4e01ULL},
    {0xb0c5117e00000002ULL, 0x7a6e3f0a1c2d4e02ULL},
    {0xb0c5117e00000003ULL, 0x7a6e3f0a1c2d4e03ULL},
    {0xb0c5117e00000004ULL, 0x7a6e3f0a1c2d4e04ULL},
    {0xb0c5117e00000005ULL, 0x7a6e3f0a1c2d4e05ULL},
};

state_t *get_state(napi_env env) {
  void *p = NULL;
  napi_get_instance_data(env, &p);
  return p;
}

/* ---------- errors and plain values ---------- */

napi_value make_error(napi_env env, const char *code, const char *msg) {
  napi_value c, m, e;
  napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &c);
  napi_create_string_utf8(env, msg ? msg : "", NAPI_AUTO_LENGTH, &m);
  napi_create_error(env, c, m, &e);
  return e;
}

static void throw_type(napi_env env, const char *fmt, const char *a, const char *b) {
  char msg[512];
  snprintf(msg, sizeof msg, fmt, a, b);
  napi_throw_type_error(env, "invalid_argument", msg);
}

static const char *type_name(napi_env env, napi_value v) {
  napi_valuetype t;
  if (napi_typeof(env, v, &t) != napi_ok) return "unknown";
  switch (t) {
  case napi_undefined: return "undefined";
  case napi_null: return "null";
  case napi_boolean: return "boolean";
  case napi_number: return "number";
  case napi_string: return "string";
  case napi_symbol: return "symbol";
  case napi_object: return "object";
  case napi_function: return "function";
  case napi_external: return "external";
  case napi_bigint: return "bigint";
  }
  return "unknown";
}

napi_value undefined(napi_env env) {
  napi_value v;
  napi_get_undefined(env, &v);
  return v;
}

napi_value str_or_null(napi_env env, const char *s) {
  napi_value v;
  if (!s) napi_get_null(env, &v);
  else napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &v);
  return v;
}

/* ---------- arguments ---------- */

/* A handle of the given kind, or a TypeError naming the parameter. */
handle_t *get_handle(napi_env env, napi_value v, int kind, const char *param) {
  napi_valuetype t;
  bool ok = false;
  void *p = NULL;
  if (napi_typeof(env, v, &t) == napi_ok && t == napi_external &&
      napi_check_object_type_tag(env, v, &kind_tags[kind], &ok) == napi_ok && ok &&
      napi_get_value_external(env, v, &p) == napi_ok && p) {
    return p;
  }
  char want[64];
  snprintf(want, sizeof want, "a boxlite %s handle", kind_names[kind]);
  throw_type(env, "%s must be %s", param, want);
  return NULL;
}

/* A malloc'd UTF-8 copy of a string argument; NULL with *isnull set for
 * null/undefined when allowed. Embedded NUL bytes are refused: C would cut
 * the string there. */
char *get_string(napi_env env, napi_value v, const char *param, int allow_null, int *isnull) {
  napi_valuetype t;
  if (isnull) *isnull = 0;
  napi_typeof(env, v, &t);
  if (allow_null && (t == napi_null || t == napi_undefined)) {
    if (isnull) *isnull = 1;
    return NULL;
  }
  if (t != napi_string) {
    throw_type(env, "%s must be a string, got %s", param, type_name(env, v));
    return NULL;
  }
  size_t len = 0;
  if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok) {
    napi_throw_error(env, "internal", "cannot read string");
    return NULL;
  }
  char *s = malloc(len + 1);
  if (!s) {
    napi_throw_error(env, "limit", "out of memory");
    return NULL;
  }
  napi_get_value_string_utf8(env, v, s, len + 1, &len);
  if (strlen(s) != len) {
    free(s);
    throw_type(env, "%s must not contain NUL characters%s", param, "");
    return NULL;
  }
  return s;
}

static int get_number(napi_env env, napi_value v, const char *param, double *out) {
  napi_valuetype t;
  napi_typeof(env, v, &t);
  if (t != napi_number) {
    throw_type(env, "%s must be a number, got %s", param, type_name(env, v));
    return 0;
  }
  napi_get_value_double(env, v, out);
  if (*out != *out) {
    throw_type(env, "%s must be a number, got %s", param, "NaN");
    return 0;
  }
  return 1;
}

/* Milliseconds: < 0 or Infinity blocks, 0 polls, > 0 bounds. */
int get_timeout(napi_env env, napi_value v, const char *param, int64_t *out) {
  double d;
  if (!get_number(env, v, param, &d)) return 0;
  if (d < 0 || d > 9.2e15) *out = -1;
  else *out = (int64_t)d;
  return 1;
}

int get_int(napi_env env, napi_value v, const char *param, int *out) {
  double d;
  if (!get_number(env, v, param, &d)) return 0;
  if (!(d >= -2147483648.0 && d <= 2147483647.0) || d != (double)(int)d) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s must be an integer in the int32 range, got %g", param, d);
    napi_throw_range_error(env, "invalid_argument", msg);
    return 0;
  }
  *out = (int)d;
  return 1;
}

int get_bool_or_undef(napi_env env, napi_value v, const char *param, int *out) {
  napi_valuetype t;
  napi_typeof(env, v, &t);
  if (t != napi_boolean && t != napi_undefined) {
    throw_type(env, "%s must be a boolean, got %s", param, type_name(env, v));
    return 0;
  }
  bool b = false;
  if (t == napi_boolean) napi_get_value_bool(env, v, &b);
  *out = b;
  return 1;
}

/* A malloc'd copy of a Buffer or Uint8Array (the caller may reuse its
 * buffer at once); never NULL on success, even for 0 bytes. */
uint8_t *get_bytes(napi_env env, napi_value v, const char *param, size_t *len) {
  bool isbuf = false;
  void *data = NULL;
  *len = 0;
  napi_is_buffer(env, v, &isbuf);
  if (isbuf) {
    napi_get_buffer_info(env, v, &data, len);
  } else {
    bool istyped = false;
    napi_is_typedarray(env, v, &istyped);
    if (!istyped) {
      throw_type(env, "%s must be a Buffer or Uint8Array, got %s", param, type_name(env, v));
      return NULL;
    }
    napi_typedarray_type tt;
    napi_value ab;
    size_t off;
    napi_get_typedarray_info(env, v, &tt, len, &data, &ab, &off);
    if (tt != napi_uint8_array && tt != napi_uint8_clamped_array && tt != napi_int8_array) {
      throw_type(env, "%s must be a Buffer or Uint8Array%s", param, "");
      return NULL;
    }
  }
  uint8_t *copy = malloc(*len ? *len : 1);
  if (!copy) {
    napi_throw_error(env, "limit", "out of memory");
    return NULL;
  }
  if (*len) memcpy(copy, data, *len);
  return copy;
}

/* ---------- handles ---------- */

static void unlink_runtime(state_t *st, handle_t *hd) {
  for (handle_t **p = &st->runtimes; *p; p = &(*p)->next_rt) {
    if (*p == hd) {
      *p = hd->next_rt;
      return;
    }
  }
}

static void handle_finalize(napi_env env, void *data, void *hint) {
  (void)hint;
  handle_t *hd = data;
  if (!hd->freed) {
    /* Never watched here: a pending watch holds a reference. Runtimes are
     * left to the environment teardown hook (freeing one stops its boxes,
     * which must not run inside a GC pass). */
    if (hd->kind == K_EXEC) boxlite_execution_free(hd->h);
    else if (hd->kind == K_BOX) boxlite_box_free(hd->h);
    else if (hd->kind == K_CELL) boxlite_cell_free(hd->h);
    else if (hd->kind == K_SESSION) boxlite_session_free(hd->h);
    else if (hd->kind == K_FORWARDER) boxlite_forwarder_free(hd->h);
  }
  if (hd->kind != K_RUNTIME) {
    free(hd);
  } else if (hd->freed) {
    state_t *st = get_state(env);
    if (st) unlink_runtime(st, hd);
    free(hd);
  }
  /* a runtime not freed stays on the state's list: teardown frees it */
}

static napi_value wrap_handle(napi_env env, int kind, void *h) {
  handle_t *hd = calloc(1, sizeof *hd);
  napi_value v;
  if (!hd) {
    napi_throw_error(env, "limit", "out of memory");
    return NULL;
  }
  hd->kind = kind;
  hd->h = h;
  if (napi_create_external(env, hd, handle_finalize, NULL, &v) != napi_ok ||
      napi_type_tag_object(env, v, &kind_tags[kind]) != napi_ok) {
    free(hd);
    napi_throw_error(env, "internal", "cannot create handle");
    return NULL;
  }
  if (kind == K_RUNTIME) {
    state_t *st = get_state(env);
    hd->next_rt = st->runtimes;
    st->runtimes = hd;
  }
  return v;
}

/* ---------- results ---------- */

napi_value r_undefined(napi_env env, work_t *w) {
  (void)w;
  return undefined(env);
}

napi_value r_cstring(napi_env env, work_t *w) { return str_or_null(env, w->cstr); }

napi_value r_string(napi_env env, work_t *w) { return str_or_null(env, w->out_str); }

napi_value r_int(napi_env env, work_t *w) {
  napi_value v;
  napi_create_int32(env, w->out_int, &v);
  return v;
}

/* A new handle of kind for w->out_h; the library's is freed when that fails. */
static napi_value new_handle(napi_env env, work_t *w, int kind) {
  napi_value v = wrap_handle(env, kind, w->out_h);
  if (v) return v;
  switch (kind) {
  case K_RUNTIME: boxlite_runtime_free(w->out_h); break;
  case K_BOX: boxlite_box_free(w->out_h); break;
  case K_EXEC: boxlite_execution_free(w->out_h); break;
  case K_SESSION: boxlite_session_free(w->out_h); break;
  case K_CELL: boxlite_cell_free(w->out_h); break;
  case K_FORWARDER: boxlite_forwarder_free(w->out_h); break;
  }
  return NULL;
}

napi_value r_runtime(napi_env env, work_t *w) { return new_handle(env, w, K_RUNTIME); }
napi_value r_box(napi_env env, work_t *w) { return new_handle(env, w, K_BOX); }
napi_value r_execution(napi_env env, work_t *w) { return new_handle(env, w, K_EXEC); }
napi_value r_session(napi_env env, work_t *w) { return new_handle(env, w, K_SESSION); }
napi_value r_cell(napi_env env, work_t *w) { return new_handle(env, w, K_CELL); }
napi_value r_forwarder(napi_env env, work_t *w) { return new_handle(env, w, K_FORWARDER); }

/* BoxLite's exit code: -N for a process a signal N killed (the C ABI, like a
 * shell, says 128+N). */
static napi_value make_exit(napi_env env, const boxlite_exit_t *x) {
  napi_value o, v;
  napi_create_object(env, &o);
  napi_create_int32(env, x->signal ? -x->signal : x->exit_code, &v);
  napi_set_named_property(env, o, "exitCode", v);
  napi_create_int32(env, x->signal, &v);
  napi_set_named_property(env, o, "signal", v);
  napi_get_boolean(env, x->timed_out != 0, &v);
  napi_set_named_property(env, o, "timedOut", v);
  return o;
}

/* {exitCode, signal, timedOut} of a wait. */
napi_value r_exit(napi_env env, work_t *w) { return make_exit(env, &w->exit); }

/* {exitCode, signal, timedOut, stdout: Buffer, stderr: Buffer, stdoutTruncated,
 * stderrTruncated} of a result. */
napi_value run_result(napi_env env, const boxlite_result_t *r) {
  napi_value o = make_exit(env, &r->exit), v;
  napi_create_buffer_copy(env, r->stdout_len, r->stdout_data, NULL, &v);
  napi_set_named_property(env, o, "stdout", v);
  napi_create_buffer_copy(env, r->stderr_len, r->stderr_data, NULL, &v);
  napi_set_named_property(env, o, "stderr", v);
  napi_get_boolean(env, r->stdout_truncated != 0, &v);
  napi_set_named_property(env, o, "stdoutTruncated", v);
  napi_get_boolean(env, r->stderr_truncated != 0, &v);
  napi_set_named_property(env, o, "stderrTruncated", v);
  return o;
}

napi_value r_result(napi_env env, work_t *w) { return run_result(env, w->res); }

/* The bytes an execution read returned, as a Buffer. */
napi_value r_bytes(napi_env env, work_t *w) {
  napi_value v;
  napi_create_buffer_copy(env, w->n, w->buf, NULL, &v);
  return v;
}

/* {stream: 1 | 2, data: Buffer} of a cell read. */
napi_value r_chunk(napi_env env, work_t *w) {
  napi_value o, v;
  napi_create_object(env, &o);
  napi_create_int32(env, w->stream, &v);
  napi_set_named_property(env, o, "stream", v);
  napi_create_buffer_copy(env, w->n, w->buf, NULL, &v);
  napi_set_named_property(env, o, "data", v);
  return o;
}
