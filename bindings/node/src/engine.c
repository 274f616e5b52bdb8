/*
 * engine.c: the one engine every function of the table (calls.c) runs on.
 *
 * A JS call reads the row's arguments into a work item, then makes the call
 * the row names (a function pointer taking the work item):
 *   - M_SYNC rows, and M_POLL rows with a timeout of 0, call it on the JS
 *     thread and return the result (or throw);
 *   - M_ASYNC rows, and M_POLL rows with any other timeout, queue the item
 *     as napi_async_work: the call runs on a libuv pool thread and the JS
 *     function returns a Promise, settled on the JS thread.
 * Either way the same code turns the outcome into JS: a status of
 * BOXLITE_OK goes through the row's result function; BOXLITE_AGAIN and
 * BOXLITE_EOF are numbers for F_SOFT rows; any other status is an Error with
 * `code` = the status name, the library's message, and what the library
 * handed out with it (`resultJson` of a session cell, `result` of a session
 * command that timed out).
 *
 * The library never calls back into JS, so nothing else crosses threads: a
 * work item is owned by the JS thread until queued, by the pool thread while
 * the call runs, and by the JS thread again when it completes.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addon.h"

/* Reads the row's arguments into w; 0 with an exception pending. */
static int read_args(napi_env env, const call_t *c, napi_value *argv, work_t *w) {
  int ns = 0, ni = 0;
  for (int k = 0; k < MAX_ARGS && c->args[k].type; k++) {
    const arg_t *a = &c->args[k];
    napi_value v = argv[k];
    switch (a->type) {
    case A_HANDLE:
      if (!(w->hd = get_handle(env, v, a->kind, a->name))) return 0;
      w->h = w->hd->h;
      break;
    case A_STR:
    case A_STR_OR_NULL: {
      int isnull = 0;
      w->s[ns] = get_string(env, v, a->name, a->type == A_STR_OR_NULL, &isnull);
      if (!w->s[ns++] && !isnull) return 0;
      break;
    }
    case A_INT:
      if (!get_int(env, v, a->name, &w->i[ni++])) return 0;
      break;
    case A_BOOL_OR_UNDEF:
      if (!get_bool_or_undef(env, v, a->name, &w->i[ni++])) return 0;
      break;
    case A_TIMEOUT:
      if (!get_timeout(env, v, a->name, &w->timeout_ms)) return 0;
      break;
    case A_CAP: {
      int cap;
      if (!get_int(env, v, a->name, &cap)) return 0;
      if (cap < 1 || (unsigned)cap > READ_CAP_MAX) {
        char msg[96];
        snprintf(msg, sizeof msg, "%s must be between 1 and %u", a->name, READ_CAP_MAX);
        napi_throw_range_error(env, "invalid_argument", msg);
        return 0;
      }
      w->cap = cap;
      break;
    }
    case A_BYTES:
      if (!(w->buf = get_bytes(env, v, a->name, &w->n))) return 0;
      break;
    }
  }
  return 1;
}

/* Frees what the work item holds (not the item). */
static void release(work_t *w) {
  for (int k = 0; k < MAX_STRS; k++) free(w->s[k]);
  if (!w->scratch) free(w->buf);
  free(w->errmsg);
  boxlite_string_free(w->out_str);
  boxlite_result_free(w->res);
}

/* Makes the call; on any thread. */
static void run(work_t *w) {
  boxlite_error_t *err = NULL;
  w->rc = w->call->fn(w, &err);
  if (err) {
    if (!w->errmsg && err->message) w->errmsg = strdup(err->message);
    boxlite_error_free(err);
  }
}

/* The JS value of the outcome, or NULL with *error set; JS thread. */
static napi_value outcome(napi_env env, work_t *w, napi_value *error) {
  napi_value v = NULL;
  *error = NULL;
  if (w->rc == BOXLITE_OK) {
    v = w->call->result(env, w);
    if (!v) {
      /* the result could not be made (a handle, out of memory): hand the exception over */
      bool pending = false;
      napi_is_exception_pending(env, &pending);
      if (!pending || napi_get_and_clear_last_exception(env, error) != napi_ok) {
        *error = make_error(env, "internal", "no result");
      }
    }
    return v;
  }
  if ((w->call->flags & F_SOFT) && w->rc >= 100) {
    napi_create_int32(env, w->rc, &v);
    return v;
  }
  const char *name = boxlite_status_name(w->rc);
  *error = make_error(env, name, w->errmsg ? w->errmsg : name);
  /* session calls hand out their result with a timeout too */
  if (w->out_str) napi_set_named_property(env, *error, "resultJson", str_or_null(env, w->out_str));
  if (w->res) napi_set_named_property(env, *error, "result", run_result(env, w->res));
  return NULL;
}

static void execute(napi_env env, void *data) {
  (void)env;
  run(data);
}

static void complete(napi_env env, napi_status status, void *data) {
  work_t *w = data;
  if (status == napi_cancelled) {
    napi_reject_deferred(env, w->d, make_error(env, "internal", "cancelled"));
  } else {
    napi_value error, v = outcome(env, w, &error);
    if (error) napi_reject_deferred(env, w->d, error);
    else napi_resolve_deferred(env, w->d, v);
  }
  if (w->ref) napi_delete_reference(env, w->ref);
  napi_delete_async_work(env, w->aw);
  release(w);
  free(w);
}

/* Queues a copy of *item on the pool; keep (if not NULL) stays alive until
 * the work completes. Returns the Promise. */
static napi_value queue(napi_env env, work_t *item, napi_value keep) {
  napi_value promise, rname;
  char name[64];
  work_t *w = malloc(sizeof *w);
  if (!w) {
    release(item);
    napi_throw_error(env, "limit", "out of memory");
    return NULL;
  }
  *w = *item;
  if (keep && napi_create_reference(env, keep, 1, &w->ref) != napi_ok) goto fail;
  if (napi_create_promise(env, &w->d, &promise) != napi_ok) goto fail;
  snprintf(name, sizeof name, "boxlite.%s", w->call->name);
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &rname);
  if (napi_create_async_work(env, NULL, rname, execute, complete, w, &w->aw) != napi_ok) goto fail;
  if (napi_queue_async_work(env, w->aw) != napi_ok) {
    napi_delete_async_work(env, w->aw);
    goto fail; /* the promise is dropped unresolved; nothing else refers to it */
  }
  return promise;
fail:
  if (w->ref) napi_delete_reference(env, w->ref);
  release(w);
  free(w);
  napi_throw_error(env, "internal", "cannot queue work");
  return NULL;
}

napi_value engine_dispatch(napi_env env, napi_callback_info info) {
  napi_value all[MAX_ARGS], argv[MAX_ARGS], undef;
  size_t argc = MAX_ARGS;
  void *data = NULL;
  if (napi_get_cb_info(env, info, &argc, all, NULL, &data) != napi_ok || !data) {
    napi_throw_error(env, "internal", "N-API call failed: napi_get_cb_info");
    return NULL;
  }
  napi_get_undefined(env, &undef);
  for (size_t k = 0; k < MAX_ARGS; k++) argv[k] = k < argc ? all[k] : undef;

  const call_t *c = data;
  work_t w;
  memset(&w, 0, sizeof w);
  w.call = c;
  if (!read_args(env, c, argv, &w)) {
    release(&w);
    return NULL;
  }
  if (c->flags & F_FREE) {
    unwatch(env, w.hd);
    if (w.hd->freed) w.h = NULL; /* freeing twice is a no-op */
    w.hd->freed = 1;
  }
  int sync = c->mode == M_SYNC || (c->mode == M_POLL && w.timeout_ms == 0);
  if (w.cap) {
    state_t *st = get_state(env);
    if (sync && w.cap <= SCRATCH) {
      w.buf = st->scratch;
      w.scratch = 1;
    } else if (!(w.buf = malloc(w.cap))) {
      release(&w);
      napi_throw_error(env, "limit", "out of memory");
      return NULL;
    }
  }
  if (!sync) return queue(env, &w, c->args[0].type == A_HANDLE ? argv[0] : NULL);

  run(&w);
  napi_value error, v = outcome(env, &w, &error);
  release(&w);
  if (error) {
    napi_throw(env, error);
    return NULL;
  }
  return v;
}
