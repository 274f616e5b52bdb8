/*
 * addon.c: the raw layer of the Node bindings. One JS function per function
 * of include/boxlite.h (the _free functions of errors, strings and results
 * are called here, never from JS), plus two helpers an event loop needs:
 * executionWatchFd / cellWatchFd (poll(2) on boxlite_execution_fd or
 * boxlite_cell_fd, the Node counterpart of Python's loop.add_reader) and benchBoxRun (the C ABI's own round-trip time,
 * measured in the same process, for bench.js).
 *
 * Handles are N-API externals with a type tag per kind (runtime, box,
 * execution, session, cell); the library handle inside is a token, never a pointer, so a
 * freed handle passed again gets the library's typed error. A value of the
 * wrong kind is a TypeError naming the parameter.
 *
 * Errors are JS Error objects with `code` = boxlite_status_name() of the
 * status ("not_found", "invalid_state", ...) and the library's message.
 *
 * Threads: calls that block (runtime new/free, image load, box list/get/
 * create/start/stop/remove, snapshots, clone, export, import, run, write, and read/wait with a timeout other
 * than 0) run as napi_async_work on libuv's pool and return a Promise. The
 * library never calls back into JS: readiness of an execution's fd is seen by
 * one poller thread per JS environment (epoll, one-shot) and handed to the JS
 * thread with a napi_threadsafe_function; the JS side then reads with
 * timeout 0. That keeps libuv's 4 pool threads free however many executions
 * stream at once.
 */
#define _GNU_SOURCE
#define NAPI_VERSION 8
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <node_api.h>

#include "boxlite.h"

/* ---------- small helpers ---------- */

#define NAPI_OK(call)                                         \
  do {                                                        \
    if ((call) != napi_ok) {                                  \
      napi_throw_error(env, "internal", "N-API call failed: " #call); \
      return NULL;                                            \
    }                                                         \
  } while (0)

#define MAX_ARGS 4
#define READ_CAP_MAX (16u << 20)
#define SCRATCH (64u << 10)

enum kind { K_RUNTIME = 1, K_BOX = 2, K_EXEC = 3, K_SESSION = 4, K_CELL = 5 };
static const char *kind_names[] = {"", "runtime", "box", "execution", "session", "cell"};
static const napi_type_tag kind_tags[] = {
    {0, 0},
    {0xb0c5117e00000001ULL, 0x7a6e3f0a1c2d4e01ULL},
    {0xb0c5117e00000002ULL, 0x7a6e3f0a1c2d4e02ULL},
    {0xb0c5117e00000003ULL, 0x7a6e3f0a1c2d4e03ULL},
    {0xb0c5117e00000004ULL, 0x7a6e3f0a1c2d4e04ULL},
    {0xb0c5117e00000005ULL, 0x7a6e3f0a1c2d4e05ULL},
};

struct watch;
typedef struct handle {
  int kind;
  void *h;            /* the library's token */
  int freed;          /* freed through the raw *Free function */
  struct watch *watch; /* executions: the pending executionWatchFd, if any */
  struct handle *next_rt; /* runtimes: the list freed at environment teardown */
} handle_t;

typedef struct watch {
  uint64_t id;
  handle_t *hd;
  int fd;
  int fired;
  napi_deferred d;
  napi_ref ref;
  struct watch *next;
} watch_t;

/* Per JS environment (main thread or a worker_thread). */
typedef struct state {
  pthread_mutex_t mu;
  int epfd, ctlfd, started, stopping;
  pthread_t thread;
  napi_threadsafe_function tsfn;
  int pending; /* watches not yet settled; the TSFN is ref'd while > 0 */
  uint64_t next_id;
  watch_t *watches;
  handle_t *runtimes;
  uint8_t scratch[SCRATCH];
} state_t;

static state_t *get_state(napi_env env) {
  void *p = NULL;
  napi_get_instance_data(env, &p);
  return p;
}

static napi_value make_error(napi_env env, const char *code, const char *msg) {
  napi_value c, m, e;
  napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &c);
  napi_create_string_utf8(env, msg ? msg : "", NAPI_AUTO_LENGTH, &m);
  napi_create_error(env, c, m, &e);
  return e;
}

/* Throws the library error (rc, err) and frees err. */
static void throw_status(napi_env env, int rc, boxlite_error_t *err) {
  const char *msg = err && err->message ? err->message : boxlite_status_name(rc);
  napi_throw(env, make_error(env, boxlite_status_name(rc), msg));
  boxlite_error_free(err);
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

static int get_args(napi_env env, napi_callback_info info, size_t want, napi_value *argv) {
  size_t argc = MAX_ARGS;
  napi_value all[MAX_ARGS];
  if (napi_get_cb_info(env, info, &argc, all, NULL, NULL) != napi_ok) return 0;
  napi_value undef;
  napi_get_undefined(env, &undef);
  for (size_t i = 0; i < want; i++) argv[i] = i < argc ? all[i] : undef;
  return 1;
}

/* A handle of the given kind, or a TypeError naming the parameter. */
static handle_t *get_handle(napi_env env, napi_value v, int kind, const char *param) {
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
static char *get_string(napi_env env, napi_value v, const char *param, int allow_null, int *isnull) {
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
static int get_timeout(napi_env env, napi_value v, const char *param, int64_t *out) {
  double d;
  if (!get_number(env, v, param, &d)) return 0;
  if (d < 0 || d > 9.2e15) *out = -1;
  else *out = (int64_t)d;
  return 1;
}

static int get_int(napi_env env, napi_value v, const char *param, int *out) {
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

static void unlink_runtime(state_t *st, handle_t *hd);

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

static napi_value str_or_null(napi_env env, const char *s) {
  napi_value v;
  if (!s) napi_get_null(env, &v);
  else napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &v);
  return v;
}

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

static napi_value undefined(napi_env env) {
  napi_value v;
  napi_get_undefined(env, &v);
  return v;
}

/* {exitCode, signal, timedOut, stdout: Buffer, stderr: Buffer, stdoutTruncated,
 * stderrTruncated} of a result. */
static napi_value run_result(napi_env env, const boxlite_result_t *r) {
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

/* {stream: 1 | 2, data: Buffer} of a cell read. */
static napi_value cell_chunk(napi_env env, int stream, const uint8_t *buf, size_t n) {
  napi_value o, v;
  napi_create_object(env, &o);
  napi_create_int32(env, stream, &v);
  napi_set_named_property(env, o, "stream", v);
  napi_create_buffer_copy(env, n, buf, NULL, &v);
  napi_set_named_property(env, o, "data", v);
  return o;
}

/* ---------- async work ---------- */

enum op {
  OP_RUNTIME_NEW, OP_RUNTIME_FREE, OP_IMAGE_LOAD, OP_BOX_LIST, OP_BOX_CREATE, OP_BOX_GET,
  OP_BOX_START, OP_BOX_STOP, OP_BOX_REMOVE, OP_BOX_RUN, OP_READ, OP_WRITE, OP_WAIT, OP_BENCH,
  OP_SESSION_NEW, OP_SESSION_RUN, OP_SESSION_RUN_START, OP_SESSION_EXEC, OP_SESSION_RESET,
  OP_CELL_READ, OP_CELL_RESULT, OP_COPY_IN, OP_COPY_OUT, OP_BOX_METRICS,
};

typedef struct work {
  napi_async_work w;
  napi_deferred d;
  napi_ref ref; /* keeps the handle argument alive while the work runs */
  int op;
  void *h;
  char *s;        /* string input */
  char *s2;       /* second string input (session options, a copy's destination) */
  char *s3;       /* third string input (a copy's options) */
  uint8_t *buf;   /* read/write buffer */
  size_t cap, n;
  int64_t i64;
  int i;
  /* results */
  int stream; /* cell reads */
  int rc;
  int errcode;
  char *errmsg;
  char *out_str;
  void *out_h;
  boxlite_result_t *res;
  boxlite_exit_t exit;
  double *times;
} work_t;

static void work_execute(napi_env env, void *data) {
  (void)env;
  work_t *w = data;
  boxlite_error_t *err = NULL;
  switch (w->op) {
  case OP_RUNTIME_NEW:
    w->rc = boxlite_runtime_new(w->s, (boxlite_runtime_t **)&w->out_h, &err);
    break;
  case OP_RUNTIME_FREE:
    boxlite_runtime_free(w->h);
    w->rc = BOXLITE_OK;
    break;
  case OP_IMAGE_LOAD:
    w->rc = boxlite_image_load(w->h, w->s, &w->out_str, &err);
    break;
  case OP_BOX_LIST:
    w->rc = boxlite_box_list(w->h, &w->out_str, &err);
    break;
  case OP_BOX_CREATE:
    w->rc = boxlite_box_create(w->h, w->s, (boxlite_box_t **)&w->out_h, &err);
    break;
  case OP_BOX_GET:
    w->rc = boxlite_box_get(w->h, w->s, (boxlite_box_t **)&w->out_h, &err);
    break;
  case OP_BOX_START:
    w->rc = boxlite_box_start(w->h, &err);
    break;
  case OP_BOX_STOP:
    w->rc = boxlite_box_stop(w->h, &err);
    break;
  case OP_BOX_REMOVE:
    w->rc = boxlite_box_remove(w->h, w->i, &err);
    break;
  case OP_BOX_RUN:
    w->rc = boxlite_box_run(w->h, w->s, &w->res, &err);
    break;
  case OP_READ:
    w->rc = boxlite_execution_read(w->h, w->i, w->buf, w->cap, w->i64, &w->n, &err);
    break;
  case OP_WRITE:
    w->rc = boxlite_execution_write(w->h, w->buf, w->n, &err);
    break;
  case OP_WAIT:
    w->rc = boxlite_execution_wait(w->h, w->i64, &w->exit, &err);
    break;
  case OP_BENCH:
    for (int k = 0; k < w->i; k++) {
      struct timespec a, b;
      boxlite_result_t *r = NULL;
      clock_gettime(CLOCK_MONOTONIC, &a);
      w->rc = boxlite_box_run(w->h, w->s, &r, &err);
      clock_gettime(CLOCK_MONOTONIC, &b);
      boxlite_result_free(r);
      if (w->rc != BOXLITE_OK) break;
      w->times[k] = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
    }
    break;
  case OP_SESSION_NEW:
    w->rc = boxlite_session_new(w->h, w->s2, w->s, (boxlite_session_t **)&w->out_h, &err);
    break;
  case OP_SESSION_RUN:
    w->rc = boxlite_session_run(w->h, w->s, w->s2, &w->out_str, &err);
    break;
  case OP_SESSION_RUN_START:
    w->rc = boxlite_session_run_start(w->h, w->s, w->s2, (boxlite_cell_t **)&w->out_h, &err);
    break;
  case OP_SESSION_EXEC:
    w->rc = boxlite_session_exec(w->h, w->s, &w->res, &err);
    break;
  case OP_SESSION_RESET:
    w->rc = boxlite_session_reset(w->h, &err);
    break;
  case OP_CELL_READ:
    w->rc = boxlite_cell_read(w->h, w->buf, w->cap, w->i64, &w->stream, &w->n, &err);
    break;
  case OP_CELL_RESULT:
    w->rc = boxlite_cell_result(w->h, w->i64, &w->out_str, &err);
    break;
  case OP_COPY_IN:
    w->rc = boxlite_box_copy_in(w->h, w->s, w->s2, w->s3, &err);
    break;
  case OP_COPY_OUT:
    w->rc = boxlite_box_copy_out(w->h, w->s, w->s2, w->s3, &err);
    break;
  case OP_BOX_METRICS:
    w->rc = boxlite_box_metrics(w->h, &w->out_str, &err);
    break;
  }
  if (err) {
    w->errcode = err->code;
    w->errmsg = err->message ? strdup(err->message) : NULL;
    boxlite_error_free(err);
  }
}

static void work_complete(napi_env env, napi_status status, void *data) {
  work_t *w = data;
  napi_value result = NULL, v;
  int failed = w->rc != BOXLITE_OK &&
               !(w->rc >= 100 && (w->op == OP_READ || w->op == OP_WAIT || w->op == OP_CELL_READ || w->op == OP_CELL_RESULT));
  if (status == napi_cancelled) {
    napi_reject_deferred(env, w->d, make_error(env, "internal", "cancelled"));
    goto out;
  }
  if (failed) {
    const char *name = boxlite_status_name(w->rc);
    napi_value e = make_error(env, name, w->errmsg ? w->errmsg : name);
    /* Session calls hand out their result with a timeout too. */
    if (w->out_str) napi_set_named_property(env, e, "resultJson", str_or_null(env, w->out_str));
    if (w->res) napi_set_named_property(env, e, "result", run_result(env, w->res));
    napi_reject_deferred(env, w->d, e);
    goto out;
  }
  switch (w->op) {
  case OP_RUNTIME_NEW:
    result = wrap_handle(env, K_RUNTIME, w->out_h);
    break;
  case OP_BOX_CREATE:
  case OP_BOX_GET:
    result = wrap_handle(env, K_BOX, w->out_h);
    break;
  case OP_IMAGE_LOAD:
  case OP_BOX_LIST:
  case OP_BOX_METRICS:
    result = str_or_null(env, w->out_str);
    break;
  case OP_BOX_RUN:
  case OP_SESSION_EXEC:
    result = run_result(env, w->res);
    break;
  case OP_SESSION_NEW:
    result = wrap_handle(env, K_SESSION, w->out_h);
    if (!result) boxlite_session_free(w->out_h);
    break;
  case OP_SESSION_RUN_START:
    result = wrap_handle(env, K_CELL, w->out_h);
    if (!result) boxlite_cell_free(w->out_h);
    break;
  case OP_SESSION_RUN:
    result = str_or_null(env, w->out_str);
    break;
  case OP_CELL_RESULT:
    if (w->rc == BOXLITE_OK) result = str_or_null(env, w->out_str);
    else napi_create_int32(env, w->rc, &result);
    break;
  case OP_CELL_READ:
    if (w->rc == BOXLITE_OK) result = cell_chunk(env, w->stream, w->buf, w->n);
    else napi_create_int32(env, w->rc, &result);
    break;
  case OP_READ:
    if (w->rc == BOXLITE_OK) napi_create_buffer_copy(env, w->n, w->buf, NULL, &result);
    else napi_create_int32(env, w->rc, &result);
    break;
  case OP_WAIT:
    if (w->rc == BOXLITE_OK) result = make_exit(env, &w->exit);
    else napi_create_int32(env, w->rc, &result);
    break;
  case OP_BENCH:
    napi_create_array_with_length(env, w->i, &result);
    for (int k = 0; k < w->i; k++) {
      napi_create_double(env, w->times[k], &v);
      napi_set_element(env, result, k, v);
    }
    break;
  default:
    result = undefined(env);
  }
  if (!result) {
    /* wrap_handle threw (out of memory): hand the exception over */
    napi_value exc;
    bool pending = false;
    napi_is_exception_pending(env, &pending);
    if (pending && napi_get_and_clear_last_exception(env, &exc) == napi_ok) napi_reject_deferred(env, w->d, exc);
    else napi_reject_deferred(env, w->d, make_error(env, "internal", "no result"));
  } else {
    napi_resolve_deferred(env, w->d, result);
  }
out:
  if (w->ref) napi_delete_reference(env, w->ref);
  napi_delete_async_work(env, w->w);
  boxlite_string_free(w->out_str);
  boxlite_result_free(w->res);
  free(w->s);
  free(w->s2);
  free(w->s3);
  free(w->buf);
  free(w->errmsg);
  free(w->times);
  free(w);
}

/* Queues w; keep (if not NULL) stays alive until the work completes. */
static napi_value queue(napi_env env, work_t *w, napi_value keep, const char *name) {
  napi_value promise, rname;
  if (keep && napi_create_reference(env, keep, 1, &w->ref) != napi_ok) goto fail;
  if (napi_create_promise(env, &w->d, &promise) != napi_ok) goto fail;
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &rname);
  if (napi_create_async_work(env, NULL, rname, work_execute, work_complete, w, &w->w) != napi_ok ||
      napi_queue_async_work(env, w->w) != napi_ok) {
    goto fail; /* the promise is dropped unresolved; nothing else refers to it */
  }
  return promise;
fail:
  if (w->ref) napi_delete_reference(env, w->ref);
  free(w->s);
  free(w->s2);
  free(w->s3);
  free(w->buf);
  free(w);
  napi_throw_error(env, "internal", "cannot queue work");
  return NULL;
}

static work_t *new_work(napi_env env, int op) {
  work_t *w = calloc(1, sizeof *w);
  if (!w) napi_throw_error(env, "limit", "out of memory");
  else w->op = op;
  return w;
}

/* ---------- library ---------- */

static napi_value js_version(napi_env env, napi_callback_info info) {
  (void)info;
  return str_or_null(env, boxlite_version());
}

static napi_value js_status_name(napi_env env, napi_callback_info info) {
  napi_value a[1];
  int code;
  if (!get_args(env, info, 1, a) || !get_int(env, a[0], "code", &code)) return NULL;
  return str_or_null(env, boxlite_status_name(code));
}

/* ---------- runtime ---------- */

static napi_value js_runtime_new(napi_env env, napi_callback_info info) {
  napi_value a[1];
  int isnull;
  if (!get_args(env, info, 1, a)) return NULL;
  char *opts = get_string(env, a[0], "optionsJson", 1, &isnull);
  if (!opts && !isnull) return NULL;
  work_t *w = new_work(env, OP_RUNTIME_NEW);
  if (!w) return free(opts), NULL;
  w->s = opts;
  return queue(env, w, NULL, "boxlite.runtimeNew");
}

static void unlink_runtime(state_t *st, handle_t *hd) {
  for (handle_t **p = &st->runtimes; *p; p = &(*p)->next_rt) {
    if (*p == hd) {
      *p = hd->next_rt;
      return;
    }
  }
}

static napi_value js_runtime_free(napi_env env, napi_callback_info info) {
  napi_value a[1];
  if (!get_args(env, info, 1, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_RUNTIME, "rt");
  if (!hd) return NULL;
  work_t *w = new_work(env, OP_RUNTIME_FREE);
  if (!w) return NULL;
  w->h = hd->h;
  if (hd->freed) w->h = NULL; /* freeing twice is a no-op */
  hd->freed = 1;
  return queue(env, w, a[0], "boxlite.runtimeFree");
}

static napi_value js_image_load(napi_env env, napi_callback_info info) {
  napi_value a[2];
  if (!get_args(env, info, 2, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_RUNTIME, "rt");
  if (!hd) return NULL;
  char *path = get_string(env, a[1], "path", 0, NULL);
  if (!path) return NULL;
  work_t *w = new_work(env, OP_IMAGE_LOAD);
  if (!w) return free(path), NULL;
  w->h = hd->h;
  w->s = path;
  return queue(env, w, a[0], "boxlite.imageLoad");
}

static napi_value js_image_list(napi_env env, napi_callback_info info) {
  napi_value a[1], v;
  if (!get_args(env, info, 1, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_RUNTIME, "rt");
  if (!hd) return NULL;
  char *out = NULL;
  boxlite_error_t *err = NULL;
  int rc = boxlite_image_list(hd->h, &out, &err);
  if (rc != BOXLITE_OK) return throw_status(env, rc, err), NULL;
  v = str_or_null(env, out);
  boxlite_string_free(out);
  return v;
}

static napi_value js_box_list(napi_env env, napi_callback_info info) {
  napi_value a[1];
  if (!get_args(env, info, 1, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_RUNTIME, "rt");
  if (!hd) return NULL;
  work_t *w = new_work(env, OP_BOX_LIST);
  if (!w) return NULL;
  w->h = hd->h;
  return queue(env, w, a[0], "boxlite.boxList");
}

/* ---------- boxes ---------- */

static napi_value rt_string_op(napi_env env, napi_callback_info info, int op, const char *param, const char *name) {
  napi_value a[2];
  if (!get_args(env, info, 2, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_RUNTIME, "rt");
  if (!hd) return NULL;
  char *s = get_string(env, a[1], param, 0, NULL);
  if (!s) return NULL;
  work_t *w = new_work(env, op);
  if (!w) return free(s), NULL;
  w->h = hd->h;
  w->s = s;
  return queue(env, w, a[0], name);
}

static napi_value js_box_create(napi_env env, napi_callback_info info) {
  return rt_string_op(env, info, OP_BOX_CREATE, "optionsJson", "boxlite.boxCreate");
}

static napi_value js_box_get(napi_env env, napi_callback_info info) {
  return rt_string_op(env, info, OP_BOX_GET, "idOrName", "boxlite.boxGet");
}

/* boxId(box), executionId(ex): the handle's id string. */
static napi_value handle_id(napi_env env, napi_callback_info info, int kind, const char *param) {
  napi_value a[1];
  if (!get_args(env, info, 1, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], kind, param);
  if (!hd) return NULL;
  const char *id = kind == K_BOX ? boxlite_box_id(hd->h) : boxlite_execution_id(hd->h);
  if (!id) {
    napi_throw(env, make_error(env, "invalid_argument", "handle is not valid (freed)"));
    return NULL;
  }
  return str_or_null(env, id);
}

static napi_value js_box_id(napi_env env, napi_callback_info info) { return handle_id(env, info, K_BOX, "box"); }
static napi_value js_execution_id(napi_env env, napi_callback_info info) { return handle_id(env, info, K_EXEC, "ex"); }

static napi_value js_box_info(napi_env env, napi_callback_info info) {
  napi_value a[1], v;
  if (!get_args(env, info, 1, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_BOX, "box");
  if (!hd) return NULL;
  char *out = NULL;
  boxlite_error_t *err = NULL;
  int rc = boxlite_box_info(hd->h, &out, &err);
  if (rc != BOXLITE_OK) return throw_status(env, rc, err), NULL;
  v = str_or_null(env, out);
  boxlite_string_free(out);
  return v;
}

static napi_value box_op(napi_env env, napi_callback_info info, int op, const char *name) {
  napi_value a[2];
  if (!get_args(env, info, 2, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_BOX, "box");
  if (!hd) return NULL;
  int force = 0;
  if (op == OP_BOX_REMOVE) {
    napi_valuetype t;
    napi_typeof(env, a[1], &t);
    if (t != napi_boolean && t != napi_undefined) {
      throw_type(env, "%s must be a boolean, got %s", "force", type_name(env, a[1]));
      return NULL;
    }
    bool b = false;
    if (t == napi_boolean) napi_get_value_bool(env, a[1], &b);
    force = b;
  }
  work_t *w = new_work(env, op);
  if (!w) return NULL;
  w->h = hd->h;
  w->i = force;
  return queue(env, w, a[0], name);
}

static napi_value js_box_start(napi_env env, napi_callback_info info) {
  return box_op(env, info, OP_BOX_START, "boxlite.boxStart");
}
static napi_value js_box_stop(napi_env env, napi_callback_info info) {
  return box_op(env, info, OP_BOX_STOP, "boxlite.boxStop");
}
static napi_value js_box_remove(napi_env env, napi_callback_info info) {
  return box_op(env, info, OP_BOX_REMOVE, "boxlite.boxRemove");
}

/* boxMetrics(box): a promise of the JSON (it asks the box's shim). */
static napi_value js_box_metrics(napi_env env, napi_callback_info info) {
  return box_op(env, info, OP_BOX_METRICS, "boxlite.boxMetrics");
}

/* runtimeMetrics(rt): the JSON, at once (in-process counters). */
static napi_value js_runtime_metrics(napi_env env, napi_callback_info info) {
  napi_value a[1], v;
  if (!get_args(env, info, 1, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_RUNTIME, "rt");
  if (!hd) return NULL;
  char *out = NULL;
  boxlite_error_t *err = NULL;
  int rc = boxlite_runtime_metrics(hd->h, &out, &err);
  if (rc != BOXLITE_OK) return throw_status(env, rc, err), NULL;
  v = str_or_null(env, out);
  boxlite_string_free(out);
  return v;
}

static napi_value js_box_free(napi_env env, napi_callback_info info) {
  napi_value a[1];
  if (!get_args(env, info, 1, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_BOX, "box");
  if (!hd) return NULL;
  if (!hd->freed) boxlite_box_free(hd->h);
  hd->freed = 1;
  return undefined(env);
}

/* ---------- executions ---------- */

static napi_value js_box_exec(napi_env env, napi_callback_info info) {
  napi_value a[2];
  if (!get_args(env, info, 2, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_BOX, "box");
  if (!hd) return NULL;
  char *cmd = get_string(env, a[1], "commandJson", 0, NULL);
  if (!cmd) return NULL;
  boxlite_execution_t *ex = NULL;
  boxlite_error_t *err = NULL;
  int rc = boxlite_box_exec(hd->h, cmd, &ex, &err);
  free(cmd);
  if (rc != BOXLITE_OK) return throw_status(env, rc, err), NULL;
  napi_value v = wrap_handle(env, K_EXEC, ex);
  if (!v) boxlite_execution_free(ex);
  return v;
}

static napi_value js_box_run(napi_env env, napi_callback_info info) {
  napi_value a[2];
  if (!get_args(env, info, 2, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_BOX, "box");
  if (!hd) return NULL;
  char *cmd = get_string(env, a[1], "commandJson", 0, NULL);
  if (!cmd) return NULL;
  work_t *w = new_work(env, OP_BOX_RUN);
  if (!w) return free(cmd), NULL;
  w->h = hd->h;
  w->s = cmd;
  return queue(env, w, a[0], "boxlite.boxRun");
}

/* boxCopyIn(box, hostSrc, boxDst, optionsJson) / boxCopyOut(box, boxSrc,
 * hostDst, optionsJson): a Promise of undefined; the copy runs on a pool
 * thread. */
static napi_value box_copy(napi_env env, napi_callback_info info, int op, const char *name) {
  napi_value a[4];
  if (!get_args(env, info, 4, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_BOX, "box");
  if (!hd) return NULL;
  char *src = get_string(env, a[1], "src", 0, NULL);
  if (!src) return NULL;
  char *dst = get_string(env, a[2], "dest", 0, NULL);
  if (!dst) return free(src), NULL;
  char *opts = get_string(env, a[3], "optionsJson", 0, NULL);
  if (!opts) return free(src), free(dst), NULL;
  work_t *w = new_work(env, op);
  if (!w) return free(src), free(dst), free(opts), NULL;
  w->h = hd->h;
  w->s = src;
  w->s2 = dst;
  w->s3 = opts;
  return queue(env, w, a[0], name);
}

static napi_value js_box_copy_in(napi_env env, napi_callback_info info) {
  return box_copy(env, info, OP_COPY_IN, "boxlite.boxCopyIn");
}
static napi_value js_box_copy_out(napi_env env, napi_callback_info info) {
  return box_copy(env, info, OP_COPY_OUT, "boxlite.boxCopyOut");
}

static int get_stream(napi_env env, napi_value v, int *stream) {
  if (!get_int(env, v, "stream", stream)) return 0;
  return 1; /* other values reach the library, which says invalid_argument */
}

/* executionRead(ex, stream, cap, timeoutMs): a Buffer, or BOXLITE_AGAIN /
 * BOXLITE_EOF as a number. timeoutMs 0 answers at once (no Promise);
 * anything else returns a Promise and waits on a pool thread. */
static napi_value js_execution_read(napi_env env, napi_callback_info info) {
  napi_value a[4], v;
  int stream, cap;
  int64_t timeout;
  if (!get_args(env, info, 4, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_EXEC, "ex");
  if (!hd || !get_stream(env, a[1], &stream) || !get_int(env, a[2], "cap", &cap) ||
      !get_timeout(env, a[3], "timeoutMs", &timeout))
    return NULL;
  if (cap < 1 || (unsigned)cap > READ_CAP_MAX) {
    napi_throw_range_error(env, "invalid_argument", "cap must be between 1 and 16777216");
    return NULL;
  }
  if (timeout == 0) {
    state_t *st = get_state(env);
    uint8_t *buf = (unsigned)cap <= SCRATCH ? st->scratch : malloc(cap);
    size_t n = 0;
    boxlite_error_t *err = NULL;
    if (!buf) return napi_throw_error(env, "limit", "out of memory"), NULL;
    int rc = boxlite_execution_read(hd->h, stream, buf, cap, 0, &n, &err);
    if (rc == BOXLITE_OK) napi_create_buffer_copy(env, n, buf, NULL, &v);
    else if (rc >= 100) napi_create_int32(env, rc, &v);
    if (buf != st->scratch) free(buf);
    if (rc != BOXLITE_OK && rc < 100) return throw_status(env, rc, err), NULL;
    return v;
  }
  work_t *w = new_work(env, OP_READ);
  if (!w) return NULL;
  w->buf = malloc(cap);
  if (!w->buf) return free(w), napi_throw_error(env, "limit", "out of memory"), NULL;
  w->h = hd->h;
  w->i = stream;
  w->cap = cap;
  w->i64 = timeout;
  return queue(env, w, a[0], "boxlite.executionRead");
}

static napi_value js_execution_fd(napi_env env, napi_callback_info info) {
  napi_value a[1], v;
  if (!get_args(env, info, 1, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_EXEC, "ex");
  if (!hd) return NULL;
  napi_create_int32(env, boxlite_execution_fd(hd->h), &v);
  return v;
}

static napi_value js_execution_write(napi_env env, napi_callback_info info) {
  napi_value a[2];
  if (!get_args(env, info, 2, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_EXEC, "ex");
  if (!hd) return NULL;
  bool isbuf = false;
  void *data = NULL;
  size_t len = 0;
  napi_is_buffer(env, a[1], &isbuf);
  if (isbuf) {
    napi_get_buffer_info(env, a[1], &data, &len);
  } else {
    bool istyped = false;
    napi_is_typedarray(env, a[1], &istyped);
    if (!istyped) {
      throw_type(env, "%s must be a Buffer or Uint8Array, got %s", "data", type_name(env, a[1]));
      return NULL;
    }
    napi_typedarray_type tt;
    napi_value ab;
    size_t off;
    napi_get_typedarray_info(env, a[1], &tt, &len, &data, &ab, &off);
    if (tt != napi_uint8_array && tt != napi_uint8_clamped_array && tt != napi_int8_array) {
      throw_type(env, "%s must be a Buffer or Uint8Array%s", "data", "");
      return NULL;
    }
  }
  work_t *w = new_work(env, OP_WRITE);
  if (!w) return NULL;
  /* copied: the caller may reuse its buffer at once */
  w->buf = malloc(len ? len : 1);
  if (!w->buf) return free(w), napi_throw_error(env, "limit", "out of memory"), NULL;
  if (len) memcpy(w->buf, data, len);
  w->n = len;
  w->h = hd->h;
  return queue(env, w, a[0], "boxlite.executionWrite");
}

static napi_value ex_simple(napi_env env, napi_callback_info info, int which) {
  napi_value a[3];
  if (!get_args(env, info, 3, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_EXEC, "ex");
  if (!hd) return NULL;
  boxlite_error_t *err = NULL;
  int rc, x = 0, y = 0;
  switch (which) {
  case 0:
    rc = boxlite_execution_close_stdin(hd->h, &err);
    break;
  case 1:
    if (!get_int(env, a[1], "signal", &x)) return NULL;
    rc = boxlite_execution_signal(hd->h, x, &err);
    break;
  case 2:
    rc = boxlite_execution_kill(hd->h, &err);
    break;
  default:
    if (!get_int(env, a[1], "rows", &x) || !get_int(env, a[2], "cols", &y)) return NULL;
    rc = boxlite_execution_resize(hd->h, x, y, &err);
  }
  if (rc != BOXLITE_OK) return throw_status(env, rc, err), NULL;
  return undefined(env);
}

static napi_value js_execution_close_stdin(napi_env env, napi_callback_info info) { return ex_simple(env, info, 0); }
static napi_value js_execution_signal(napi_env env, napi_callback_info info) { return ex_simple(env, info, 1); }
static napi_value js_execution_kill(napi_env env, napi_callback_info info) { return ex_simple(env, info, 2); }
static napi_value js_execution_resize(napi_env env, napi_callback_info info) { return ex_simple(env, info, 3); }

/* executionWait(ex, timeoutMs): {exitCode, signal, timedOut}, or
 * BOXLITE_AGAIN. timeoutMs 0 answers at once; otherwise a Promise. */
static napi_value js_execution_wait(napi_env env, napi_callback_info info) {
  napi_value a[2];
  int64_t timeout;
  if (!get_args(env, info, 2, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_EXEC, "ex");
  if (!hd || !get_timeout(env, a[1], "timeoutMs", &timeout)) return NULL;
  if (timeout == 0) {
    boxlite_exit_t x;
    boxlite_error_t *err = NULL;
    napi_value v;
    int rc = boxlite_execution_wait(hd->h, 0, &x, &err);
    if (rc == BOXLITE_OK) return make_exit(env, &x);
    if (rc >= 100) return napi_create_int32(env, rc, &v), v;
    return throw_status(env, rc, err), NULL;
  }
  work_t *w = new_work(env, OP_WAIT);
  if (!w) return NULL;
  w->h = hd->h;
  w->i64 = timeout;
  return queue(env, w, a[0], "boxlite.executionWait");
}

/* ---------- the fd poller ---------- */

static void watch_settle(napi_env env, state_t *st, watch_t *w, napi_value rejection) {
  if (rejection) napi_reject_deferred(env, w->d, rejection);
  else napi_resolve_deferred(env, w->d, undefined(env));
  napi_delete_reference(env, w->ref);
  free(w);
  if (--st->pending == 0 && st->tsfn) napi_unref_threadsafe_function(env, st->tsfn);
}

/* Removes w from the list; callers hold st->mu. */
static void watch_unlink(state_t *st, watch_t *w) {
  for (watch_t **p = &st->watches; *p; p = &(*p)->next) {
    if (*p == w) {
      *p = w->next;
      break;
    }
  }
  if (w->hd && w->hd->watch == w) w->hd->watch = NULL;
}

static void tsfn_call(napi_env env, napi_value js_cb, void *context, void *data) {
  (void)js_cb;
  state_t *st = context;
  uint64_t id = (uint64_t)(uintptr_t)data;
  if (!env) return; /* the environment is going away */
  pthread_mutex_lock(&st->mu);
  watch_t *w = st->watches;
  while (w && w->id != id) w = w->next;
  if (w) watch_unlink(st, w);
  pthread_mutex_unlock(&st->mu);
  if (w) watch_settle(env, st, w, NULL);
}

static void *poller(void *arg) {
  state_t *st = arg;
  struct epoll_event evs[64];
  for (;;) {
    int n = epoll_wait(st->epfd, evs, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < n; i++) {
      uint64_t id = evs[i].data.u64;
      if (id == 0) {
        uint64_t x;
        if (read(st->ctlfd, &x, sizeof x) < 0) { /* nothing to do */ }
        pthread_mutex_lock(&st->mu);
        int stop = st->stopping;
        pthread_mutex_unlock(&st->mu);
        if (stop) return NULL;
        continue;
      }
      pthread_mutex_lock(&st->mu);
      watch_t *w = st->watches;
      while (w && w->id != id) w = w->next;
      int post = w && !w->fired;
      if (post) {
        w->fired = 1;
        epoll_ctl(st->epfd, EPOLL_CTL_DEL, w->fd, NULL);
      }
      pthread_mutex_unlock(&st->mu);
      if (post) napi_call_threadsafe_function(st->tsfn, (void *)(uintptr_t)id, napi_tsfn_nonblocking);
    }
  }
  return NULL;
}

static int poller_start(napi_env env, state_t *st) {
  if (st->started) return 1;
  napi_value name;
  napi_create_string_utf8(env, "boxlite.poller", NAPI_AUTO_LENGTH, &name);
  st->epfd = epoll_create1(EPOLL_CLOEXEC);
  st->ctlfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (st->epfd < 0 || st->ctlfd < 0) goto fail;
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
  if (epoll_ctl(st->epfd, EPOLL_CTL_ADD, st->ctlfd, &ev) < 0) goto fail;
  if (napi_create_threadsafe_function(env, NULL, NULL, name, 0, 1, NULL, NULL, st, tsfn_call, &st->tsfn) != napi_ok)
    goto fail;
  napi_unref_threadsafe_function(env, st->tsfn);
  if (pthread_create(&st->thread, NULL, poller, st) != 0) {
    napi_release_threadsafe_function(st->tsfn, napi_tsfn_abort);
    st->tsfn = NULL;
    goto fail;
  }
  st->started = 1;
  return 1;
fail:
  if (st->epfd >= 0) close(st->epfd);
  if (st->ctlfd >= 0) close(st->ctlfd);
  st->epfd = st->ctlfd = -1;
  napi_throw_error(env, "internal", "cannot start the execution fd poller");
  return 0;
}

/* executionWatchFd(ex): a Promise that resolves once boxlite_execution_fd(ex)
 * is readable (one-shot; call again to wait again), and rejects with code
 * "closed" if the execution is freed meanwhile. One watch per execution. */
static napi_value watch_fd(napi_env env, napi_callback_info info, int kind) {
  napi_value a[1], promise;
  if (!get_args(env, info, 1, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], kind, kind == K_EXEC ? "ex" : "cell");
  if (!hd) return NULL;
  state_t *st = get_state(env);
  int fd = hd->freed ? -1 : kind == K_EXEC ? boxlite_execution_fd(hd->h) : boxlite_cell_fd(hd->h);
  if (fd < 0) {
    char msg[96];
    snprintf(msg, sizeof msg, "%s handle is not valid (freed)", kind_names[kind]);
    napi_throw(env, make_error(env, "invalid_argument", msg));
    return NULL;
  }
  if (hd->watch) {
    char msg[96];
    snprintf(msg, sizeof msg, "watchFd: this %s is already being watched", kind_names[kind]);
    napi_throw(env, make_error(env, "invalid_state", msg));
    return NULL;
  }
  if (!poller_start(env, st)) return NULL;
  watch_t *w = calloc(1, sizeof *w);
  if (!w) return napi_throw_error(env, "limit", "out of memory"), NULL;
  if (napi_create_promise(env, &w->d, &promise) != napi_ok || napi_create_reference(env, a[0], 1, &w->ref) != napi_ok) {
    free(w);
    napi_throw_error(env, "internal", "cannot create promise");
    return NULL;
  }
  w->hd = hd;
  w->fd = fd;
  pthread_mutex_lock(&st->mu);
  w->id = ++st->next_id;
  w->next = st->watches;
  st->watches = w;
  hd->watch = w;
  struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.u64 = w->id};
  int rc = epoll_ctl(st->epfd, EPOLL_CTL_ADD, fd, &ev);
  if (rc < 0 && errno == EEXIST) rc = epoll_ctl(st->epfd, EPOLL_CTL_MOD, fd, &ev);
  int e = errno;
  if (rc < 0) watch_unlink(st, w);
  pthread_mutex_unlock(&st->mu);
  if (st->pending++ == 0) napi_ref_threadsafe_function(env, st->tsfn);
  if (rc < 0) watch_settle(env, st, w, make_error(env, "internal", strerror(e)));
  return promise;
}

static napi_value js_execution_watch_fd(napi_env env, napi_callback_info info) {
  return watch_fd(env, info, K_EXEC);
}

/* Drops a pending watch of hd (rejecting it with "closed"); JS thread only. */
static void unwatch(napi_env env, handle_t *hd) {
  state_t *st = get_state(env);
  pthread_mutex_lock(&st->mu);
  watch_t *w = hd->watch;
  if (w) {
    if (!w->fired) epoll_ctl(st->epfd, EPOLL_CTL_DEL, w->fd, NULL);
    watch_unlink(st, w);
  }
  pthread_mutex_unlock(&st->mu);
  if (w) {
    char msg[96];
    snprintf(msg, sizeof msg, "%s was freed while its fd was watched", kind_names[hd->kind]);
    watch_settle(env, st, w, make_error(env, "closed", msg));
  }
}

static napi_value js_execution_free(napi_env env, napi_callback_info info) {
  napi_value a[1];
  if (!get_args(env, info, 1, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_EXEC, "ex");
  if (!hd) return NULL;
  unwatch(env, hd);
  if (!hd->freed) boxlite_execution_free(hd->h);
  hd->freed = 1;
  return undefined(env);
}

/* benchBoxRun(box, commandJson, n): n runs of boxlite_box_run back to back
 * on one pool thread; resolves to their durations in ms, timed in C around
 * the call alone. The baseline bench.js compares the JS layers against. */
static napi_value js_bench_box_run(napi_env env, napi_callback_info info) {
  napi_value a[3];
  int n;
  if (!get_args(env, info, 3, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_BOX, "box");
  if (!hd) return NULL;
  char *cmd = get_string(env, a[1], "commandJson", 0, NULL);
  if (!cmd) return NULL;
  if (!get_int(env, a[2], "n", &n)) return free(cmd), NULL;
  if (n < 1 || n > 1000000) {
    free(cmd);
    napi_throw_range_error(env, "invalid_argument", "n must be between 1 and 1000000");
    return NULL;
  }
  work_t *w = new_work(env, OP_BENCH);
  if (!w) return free(cmd), NULL;
  w->times = calloc(n, sizeof(double));
  if (!w->times) return free(cmd), free(w), napi_throw_error(env, "limit", "out of memory"), NULL;
  w->h = hd->h;
  w->s = cmd;
  w->i = n;
  return queue(env, w, a[0], "boxlite.benchBoxRun");
}

/* ---------- sessions ---------- */

/* sessionNew(box, kind, optionsJson | null): Promise of a session handle. */
static napi_value js_session_new(napi_env env, napi_callback_info info) {
  napi_value a[3];
  int isnull;
  if (!get_args(env, info, 3, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_BOX, "box");
  if (!hd) return NULL;
  char *kind = get_string(env, a[1], "kind", 0, NULL);
  if (!kind) return NULL;
  char *opts = get_string(env, a[2], "optionsJson", 1, &isnull);
  if (!opts && !isnull) return free(kind), NULL;
  work_t *w = new_work(env, OP_SESSION_NEW);
  if (!w) return free(kind), free(opts), NULL;
  w->h = hd->h;
  w->s = opts;
  w->s2 = kind;
  return queue(env, w, a[0], "boxlite.sessionNew");
}

/* A session's code or command call: (s, string, optionsJson?) on the pool. */
static napi_value session_string_op(napi_env env, napi_callback_info info, int op, const char *param,
                                    int with_options, const char *name) {
  napi_value a[3];
  char *opts = NULL;
  int isnull = 1;
  if (!get_args(env, info, 3, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_SESSION, "session");
  if (!hd) return NULL;
  if (with_options) {
    opts = get_string(env, a[2], "optionsJson", 1, &isnull);
    if (!opts && !isnull) return NULL;
  }
  char *str = get_string(env, a[1], param, 0, NULL);
  if (!str) return free(opts), NULL;
  work_t *w = new_work(env, op);
  if (!w) return free(str), free(opts), NULL;
  w->h = hd->h;
  w->s = str;
  w->s2 = opts; /* NULL: no options */
  return queue(env, w, a[0], name);
}

/* sessionRun(s, code, optionsJson|null): Promise of the result JSON; a timeout
 * rejects with code "timeout" and `resultJson`. */
static napi_value js_session_run(napi_env env, napi_callback_info info) {
  return session_string_op(env, info, OP_SESSION_RUN, "code", 1, "boxlite.sessionRun");
}

/* sessionRunStart(s, code, optionsJson|null): Promise of a cell handle. */
static napi_value js_session_run_start(napi_env env, napi_callback_info info) {
  return session_string_op(env, info, OP_SESSION_RUN_START, "code", 1, "boxlite.sessionRunStart");
}

/* sessionExec(s, commandJson): Promise of {exitCode, signal, timedOut,
 * stdout, stderr}; a timeout rejects with code "timeout" and `result`. */
static napi_value js_session_exec(napi_env env, napi_callback_info info) {
  return session_string_op(env, info, OP_SESSION_EXEC, "commandJson", 0, "boxlite.sessionExec");
}

static napi_value js_session_reset(napi_env env, napi_callback_info info) {
  napi_value a[1];
  if (!get_args(env, info, 1, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_SESSION, "session");
  if (!hd) return NULL;
  work_t *w = new_work(env, OP_SESSION_RESET);
  if (!w) return NULL;
  w->h = hd->h;
  return queue(env, w, a[0], "boxlite.sessionReset");
}

static napi_value js_session_interrupt(napi_env env, napi_callback_info info) {
  napi_value a[1];
  if (!get_args(env, info, 1, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_SESSION, "session");
  if (!hd) return NULL;
  boxlite_error_t *err = NULL;
  int rc = boxlite_session_interrupt(hd->h, &err);
  if (rc != BOXLITE_OK) return throw_status(env, rc, err), NULL;
  return undefined(env);
}

static napi_value js_session_info(napi_env env, napi_callback_info info) {
  napi_value a[1], v;
  if (!get_args(env, info, 1, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_SESSION, "session");
  if (!hd) return NULL;
  char *out = NULL;
  boxlite_error_t *err = NULL;
  int rc = boxlite_session_info(hd->h, &out, &err);
  if (rc != BOXLITE_OK) return throw_status(env, rc, err), NULL;
  v = str_or_null(env, out);
  boxlite_string_free(out);
  return v;
}

static napi_value js_session_free(napi_env env, napi_callback_info info) {
  napi_value a[1];
  if (!get_args(env, info, 1, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_SESSION, "session");
  if (!hd) return NULL;
  if (!hd->freed) boxlite_session_free(hd->h);
  hd->freed = 1;
  return undefined(env);
}

/* cellRead(c, cap, timeoutMs): {stream, data}, or BOXLITE_AGAIN /
 * BOXLITE_EOF as a number. timeoutMs 0 answers at once; else a Promise. */
static napi_value js_cell_read(napi_env env, napi_callback_info info) {
  napi_value a[3], v = NULL;
  int cap;
  int64_t timeout;
  if (!get_args(env, info, 3, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_CELL, "cell");
  if (!hd || !get_int(env, a[1], "cap", &cap) || !get_timeout(env, a[2], "timeoutMs", &timeout)) return NULL;
  if (cap < 1 || (unsigned)cap > READ_CAP_MAX) {
    napi_throw_range_error(env, "invalid_argument", "cap must be between 1 and 16777216");
    return NULL;
  }
  if (timeout == 0) {
    state_t *st = get_state(env);
    uint8_t *buf = (unsigned)cap <= SCRATCH ? st->scratch : malloc(cap);
    size_t n = 0;
    int stream = 0;
    boxlite_error_t *err = NULL;
    if (!buf) return napi_throw_error(env, "limit", "out of memory"), NULL;
    int rc = boxlite_cell_read(hd->h, buf, cap, 0, &stream, &n, &err);
    if (rc == BOXLITE_OK) v = cell_chunk(env, stream, buf, n);
    else if (rc >= 100) napi_create_int32(env, rc, &v);
    if (buf != st->scratch) free(buf);
    if (rc != BOXLITE_OK && rc < 100) return throw_status(env, rc, err), NULL;
    return v;
  }
  work_t *w = new_work(env, OP_CELL_READ);
  if (!w) return NULL;
  w->buf = malloc(cap);
  if (!w->buf) return free(w), napi_throw_error(env, "limit", "out of memory"), NULL;
  w->h = hd->h;
  w->cap = cap;
  w->i64 = timeout;
  return queue(env, w, a[0], "boxlite.cellRead");
}

static napi_value js_cell_fd(napi_env env, napi_callback_info info) {
  napi_value a[1], v;
  if (!get_args(env, info, 1, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_CELL, "cell");
  if (!hd) return NULL;
  napi_create_int32(env, hd->freed ? -1 : boxlite_cell_fd(hd->h), &v);
  return v;
}

/* cellResult(c, timeoutMs): the result JSON, or BOXLITE_AGAIN; timeoutMs 0
 * answers at once, else a Promise. A timeout of the cell throws/rejects with
 * code "timeout" and `resultJson`. */
static napi_value js_cell_result(napi_env env, napi_callback_info info) {
  napi_value a[2], v;
  int64_t timeout;
  if (!get_args(env, info, 2, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_CELL, "cell");
  if (!hd || !get_timeout(env, a[1], "timeoutMs", &timeout)) return NULL;
  if (timeout == 0) {
    char *out = NULL;
    boxlite_error_t *err = NULL;
    int rc = boxlite_cell_result(hd->h, 0, &out, &err);
    if (rc == BOXLITE_AGAIN) return napi_create_int32(env, rc, &v), v;
    if (rc == BOXLITE_OK) {
      v = str_or_null(env, out);
      boxlite_string_free(out);
      return v;
    }
    const char *name = boxlite_status_name(rc);
    napi_value e = make_error(env, name, err && err->message ? err->message : name);
    if (out) napi_set_named_property(env, e, "resultJson", str_or_null(env, out));
    boxlite_string_free(out);
    boxlite_error_free(err);
    napi_throw(env, e);
    return NULL;
  }
  work_t *w = new_work(env, OP_CELL_RESULT);
  if (!w) return NULL;
  w->h = hd->h;
  w->i64 = timeout;
  return queue(env, w, a[0], "boxlite.cellResult");
}

static napi_value js_cell_interrupt(napi_env env, napi_callback_info info) {
  napi_value a[1];
  if (!get_args(env, info, 1, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_CELL, "cell");
  if (!hd) return NULL;
  boxlite_error_t *err = NULL;
  int rc = boxlite_cell_interrupt(hd->h, &err);
  if (rc != BOXLITE_OK) return throw_status(env, rc, err), NULL;
  return undefined(env);
}

static napi_value js_cell_free(napi_env env, napi_callback_info info) {
  napi_value a[1];
  if (!get_args(env, info, 1, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], K_CELL, "cell");
  if (!hd) return NULL;
  unwatch(env, hd);
  if (!hd->freed) boxlite_cell_free(hd->h);
  hd->freed = 1;
  return undefined(env);
}

/* cellWatchFd(c): as executionWatchFd, for a cell's fd. */
static napi_value js_cell_watch_fd(napi_env env, napi_callback_info info) {
  return watch_fd(env, info, K_CELL);
}

/* ---------- snapshots, clones, archives ----------
 *
 * Each blocks (a disk copy) and runs on the pool with its own small work
 * record: boxSnapshotCreate(box, name|null), boxSnapshotList(box),
 * boxSnapshotGet(box, name) -> JSON string; boxSnapshotRemove/Restore(box,
 * name) -> undefined; boxClone(box, optionsJson|null) -> box handle;
 * boxExport(box, dest) -> path; runtimeImportBox(rt, path, name|null) -> box
 * handle. */

enum snap_op { SN_CREATE, SN_LIST, SN_GET, SN_REMOVE, SN_RESTORE, SN_CLONE, SN_EXPORT, SN_IMPORT };

typedef struct snap_work {
  napi_async_work w;
  napi_deferred d;
  napi_ref ref;
  int op;
  void *h;
  char *s1, *s2;
  int rc;
  char *errmsg;
  char *out_str;
  void *out_h;
} snap_work_t;

static void snap_execute(napi_env env, void *data) {
  (void)env;
  snap_work_t *w = data;
  boxlite_error_t *err = NULL;
  switch (w->op) {
  case SN_CREATE: w->rc = boxlite_box_snapshot_create(w->h, w->s1, &w->out_str, &err); break;
  case SN_LIST: w->rc = boxlite_box_snapshot_list(w->h, &w->out_str, &err); break;
  case SN_GET: w->rc = boxlite_box_snapshot_get(w->h, w->s1, &w->out_str, &err); break;
  case SN_REMOVE: w->rc = boxlite_box_snapshot_remove(w->h, w->s1, &err); break;
  case SN_RESTORE: w->rc = boxlite_box_snapshot_restore(w->h, w->s1, &err); break;
  case SN_CLONE: w->rc = boxlite_box_clone(w->h, w->s1, (boxlite_box_t **)&w->out_h, &err); break;
  case SN_EXPORT: w->rc = boxlite_box_export(w->h, w->s1, &w->out_str, &err); break;
  case SN_IMPORT: w->rc = boxlite_runtime_import_box(w->h, w->s1, w->s2, (boxlite_box_t **)&w->out_h, &err); break;
  }
  if (err) {
    w->errmsg = err->message ? strdup(err->message) : NULL;
    boxlite_error_free(err);
  }
}

static void snap_complete(napi_env env, napi_status status, void *data) {
  snap_work_t *w = data;
  napi_value result = NULL;
  if (status == napi_cancelled) {
    napi_reject_deferred(env, w->d, make_error(env, "internal", "cancelled"));
  } else if (w->rc != BOXLITE_OK) {
    const char *name = boxlite_status_name(w->rc);
    napi_reject_deferred(env, w->d, make_error(env, name, w->errmsg ? w->errmsg : name));
  } else {
    if (w->op == SN_CLONE || w->op == SN_IMPORT) {
      result = wrap_handle(env, K_BOX, w->out_h);
      if (!result) boxlite_box_free(w->out_h);
    } else if (w->op == SN_REMOVE || w->op == SN_RESTORE) {
      result = undefined(env);
    } else {
      result = str_or_null(env, w->out_str);
    }
    if (result) {
      napi_resolve_deferred(env, w->d, result);
    } else {
      napi_value exc;
      bool pending = false;
      napi_is_exception_pending(env, &pending);
      if (pending && napi_get_and_clear_last_exception(env, &exc) == napi_ok) napi_reject_deferred(env, w->d, exc);
      else napi_reject_deferred(env, w->d, make_error(env, "internal", "no result"));
    }
  }
  if (w->ref) napi_delete_reference(env, w->ref);
  napi_delete_async_work(env, w->w);
  boxlite_string_free(w->out_str);
  free(w->s1);
  free(w->s2);
  free(w->errmsg);
  free(w);
}

/* Reads (handle of kind, up to two strings; param names NULL past nstr,
 * a leading '?' allows null) and queues op. */
static napi_value snap_queue(napi_env env, napi_callback_info info, int op, int kind, const char *hparam,
                             const char *p1, const char *p2, const char *name) {
  napi_value a[3];
  if (!get_args(env, info, 3, a)) return NULL;
  handle_t *hd = get_handle(env, a[0], kind, hparam);
  if (!hd) return NULL;
  char *s[2] = {NULL, NULL};
  const char *ps[2] = {p1, p2};
  for (int i = 0; i < 2; i++) {
    if (!ps[i]) continue;
    int allow_null = ps[i][0] == '?', isnull = 0;
    s[i] = get_string(env, a[i + 1], ps[i] + allow_null, allow_null, &isnull);
    if (!s[i] && !isnull) {
      free(s[0]);
      return NULL;
    }
  }
  snap_work_t *w = calloc(1, sizeof *w);
  napi_value promise, rname;
  if (!w) goto fail;
  w->op = op;
  w->h = hd->h;
  w->s1 = s[0];
  w->s2 = s[1];
  if (napi_create_reference(env, a[0], 1, &w->ref) != napi_ok) goto fail;
  if (napi_create_promise(env, &w->d, &promise) != napi_ok) goto fail;
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &rname);
  if (napi_create_async_work(env, NULL, rname, snap_execute, snap_complete, w, &w->w) != napi_ok ||
      napi_queue_async_work(env, w->w) != napi_ok)
    goto fail; /* the promise is dropped unresolved */
  return promise;
fail:
  if (w && w->ref) napi_delete_reference(env, w->ref);
  free(s[0]);
  free(s[1]);
  free(w);
  napi_throw_error(env, "internal", "cannot queue work");
  return NULL;
}

static napi_value js_box_snapshot_create(napi_env env, napi_callback_info info) {
  return snap_queue(env, info, SN_CREATE, K_BOX, "box", "?name", NULL, "boxlite.boxSnapshotCreate");
}
static napi_value js_box_snapshot_list(napi_env env, napi_callback_info info) {
  return snap_queue(env, info, SN_LIST, K_BOX, "box", NULL, NULL, "boxlite.boxSnapshotList");
}
static napi_value js_box_snapshot_get(napi_env env, napi_callback_info info) {
  return snap_queue(env, info, SN_GET, K_BOX, "box", "name", NULL, "boxlite.boxSnapshotGet");
}
static napi_value js_box_snapshot_remove(napi_env env, napi_callback_info info) {
  return snap_queue(env, info, SN_REMOVE, K_BOX, "box", "name", NULL, "boxlite.boxSnapshotRemove");
}
static napi_value js_box_snapshot_restore(napi_env env, napi_callback_info info) {
  return snap_queue(env, info, SN_RESTORE, K_BOX, "box", "name", NULL, "boxlite.boxSnapshotRestore");
}
static napi_value js_box_clone(napi_env env, napi_callback_info info) {
  return snap_queue(env, info, SN_CLONE, K_BOX, "box", "?optionsJson", NULL, "boxlite.boxClone");
}
static napi_value js_box_export(napi_env env, napi_callback_info info) {
  return snap_queue(env, info, SN_EXPORT, K_BOX, "box", "dest", NULL, "boxlite.boxExport");
}
static napi_value js_runtime_import_box(napi_env env, napi_callback_info info) {
  return snap_queue(env, info, SN_IMPORT, K_RUNTIME, "rt", "archivePath", "?name", "boxlite.runtimeImportBox");
}

/* ---------- module ---------- */

/* Environment teardown: stop the poller, then free the runtimes JS did not
 * close, which stops the boxes they started (and removes auto_remove ones)
 * instead of leaving that to the shims noticing the process is gone. */
static void teardown(void *arg) {
  state_t *st = arg;
  if (st->started) {
    pthread_mutex_lock(&st->mu);
    st->stopping = 1;
    pthread_mutex_unlock(&st->mu);
    uint64_t one = 1;
    if (write(st->ctlfd, &one, sizeof one) < 0) { /* the thread may be gone */ }
    pthread_join(st->thread, NULL);
    close(st->epfd);
    close(st->ctlfd);
    napi_release_threadsafe_function(st->tsfn, napi_tsfn_abort);
  }
  for (handle_t *hd = st->runtimes; hd;) {
    handle_t *next = hd->next_rt;
    if (!hd->freed) boxlite_runtime_free(hd->h);
    hd->freed = 1;
    hd = next;
  }
  /* watches and runtime structs still referenced by externals are left to
   * process exit: their finalizers may still run after this hook */
}

static void state_finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)data;
  (void)hint;
  /* the state outlives the hook above; it is tiny and freed with the process */
}

static void set_int(napi_env env, napi_value obj, const char *name, int v) {
  napi_value x;
  napi_create_int32(env, v, &x);
  napi_set_named_property(env, obj, name, x);
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  state_t *st = calloc(1, sizeof *st);
  if (!st) return NULL;
  pthread_mutex_init(&st->mu, NULL);
  st->epfd = st->ctlfd = -1;
  napi_set_instance_data(env, st, state_finalize, NULL);
  napi_add_env_cleanup_hook(env, teardown, st);

  napi_property_descriptor fns[] = {
#define FN(name, f) {name, NULL, f, NULL, NULL, NULL, napi_enumerable, NULL}
      FN("version", js_version),
      FN("statusName", js_status_name),
      FN("runtimeNew", js_runtime_new),
      FN("runtimeFree", js_runtime_free),
      FN("imageLoad", js_image_load),
      FN("imageList", js_image_list),
      FN("boxList", js_box_list),
      FN("boxCreate", js_box_create),
      FN("boxGet", js_box_get),
      FN("boxId", js_box_id),
      FN("boxInfo", js_box_info),
      FN("boxStart", js_box_start),
      FN("boxCopyIn", js_box_copy_in),
      FN("boxCopyOut", js_box_copy_out),
      FN("boxStop", js_box_stop),
      FN("boxRemove", js_box_remove),
      FN("boxMetrics", js_box_metrics),
      FN("runtimeMetrics", js_runtime_metrics),
      FN("boxFree", js_box_free),
      FN("boxExec", js_box_exec),
      FN("boxRun", js_box_run),
      FN("executionRead", js_execution_read),
      FN("executionFd", js_execution_fd),
      FN("executionWrite", js_execution_write),
      FN("executionCloseStdin", js_execution_close_stdin),
      FN("executionWait", js_execution_wait),
      FN("executionSignal", js_execution_signal),
      FN("executionKill", js_execution_kill),
      FN("executionResize", js_execution_resize),
      FN("executionId", js_execution_id),
      FN("executionFree", js_execution_free),
      FN("executionWatchFd", js_execution_watch_fd),
      FN("benchBoxRun", js_bench_box_run),
      FN("sessionNew", js_session_new),
      FN("sessionRun", js_session_run),
      FN("sessionRunStart", js_session_run_start),
      FN("sessionExec", js_session_exec),
      FN("sessionInterrupt", js_session_interrupt),
      FN("sessionReset", js_session_reset),
      FN("sessionInfo", js_session_info),
      FN("sessionFree", js_session_free),
      FN("cellRead", js_cell_read),
      FN("cellFd", js_cell_fd),
      FN("cellResult", js_cell_result),
      FN("cellInterrupt", js_cell_interrupt),
      FN("cellFree", js_cell_free),
      FN("cellWatchFd", js_cell_watch_fd),
      FN("boxSnapshotCreate", js_box_snapshot_create),
      FN("boxSnapshotList", js_box_snapshot_list),
      FN("boxSnapshotGet", js_box_snapshot_get),
      FN("boxSnapshotRemove", js_box_snapshot_remove),
      FN("boxSnapshotRestore", js_box_snapshot_restore),
      FN("boxClone", js_box_clone),
      FN("boxExport", js_box_export),
      FN("runtimeImportBox", js_runtime_import_box),
#undef FN
  };
  NAPI_OK(napi_define_properties(env, exports, sizeof fns / sizeof fns[0], fns));

  set_int(env, exports, "VERSION_MAJOR", BOXLITE_VERSION_MAJOR);
  set_int(env, exports, "VERSION_MINOR", BOXLITE_VERSION_MINOR);
  set_int(env, exports, "VERSION_PATCH", BOXLITE_VERSION_PATCH);
  set_int(env, exports, "OK", BOXLITE_OK);
  /* BEGIN GENERATED: error codes (go generate ./errdefs; do not edit) */
  set_int(env, exports, "ERR_INVALID_ARGUMENT", BOXLITE_ERR_INVALID_ARGUMENT);
  set_int(env, exports, "ERR_NOT_FOUND", BOXLITE_ERR_NOT_FOUND);
  set_int(env, exports, "ERR_ALREADY_EXISTS", BOXLITE_ERR_ALREADY_EXISTS);
  set_int(env, exports, "ERR_INVALID_STATE", BOXLITE_ERR_INVALID_STATE);
  set_int(env, exports, "ERR_TIMEOUT", BOXLITE_ERR_TIMEOUT);
  set_int(env, exports, "ERR_UNSUPPORTED", BOXLITE_ERR_UNSUPPORTED);
  set_int(env, exports, "ERR_BOOT_FAILED", BOXLITE_ERR_BOOT_FAILED);
  set_int(env, exports, "ERR_CLOSED", BOXLITE_ERR_CLOSED);
  set_int(env, exports, "ERR_LIMIT", BOXLITE_ERR_LIMIT);
  set_int(env, exports, "ERR_INTERNAL", BOXLITE_ERR_INTERNAL);
  set_int(env, exports, "ERR_UNREACHABLE", BOXLITE_ERR_UNREACHABLE);
  /* END GENERATED: error codes */
  set_int(env, exports, "AGAIN", BOXLITE_AGAIN);
  set_int(env, exports, "EOF", BOXLITE_EOF);
  set_int(env, exports, "STDOUT", BOXLITE_STDOUT);
  set_int(env, exports, "STDERR", BOXLITE_STDERR);
  napi_value vs;
  napi_create_string_utf8(env, BOXLITE_VERSION_STRING, NAPI_AUTO_LENGTH, &vs);
  napi_set_named_property(env, exports, "VERSION_STRING", vs);
  return exports;
}
