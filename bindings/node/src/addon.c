/*
 * addon.c: the raw layer of the Node bindings (native/boxlite.node), the
 * module itself: one JS function per function of include/boxlite.h (the
 * rows of calls.c, all run by engine.c), executionWatchFd / cellWatchFd
 * (poller.c), the header's constants, and the environment's teardown.
 * addon.h says which file does what.
 *
 * Threads: calls that block run on libuv's pool and return a Promise; the
 * others answer at once (see calls.c). The library never calls back into
 * JS.
 */
#include <stdlib.h>

#include "addon.h"

/* Environment teardown: stop the poller, then free the runtimes JS did not
 * close, which stops the boxes they started (and removes auto_remove ones)
 * instead of leaving that to the shims noticing the process is gone. */
static void teardown(void *arg) {
  state_t *st = arg;
  poller_stop(st);
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

static int define(napi_env env, napi_value exports, const char *name, napi_callback cb, void *data) {
  napi_property_descriptor d = {name, NULL, cb, NULL, NULL, NULL, napi_enumerable, data};
  return napi_define_properties(env, exports, 1, &d) == napi_ok;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  state_t *st = calloc(1, sizeof *st);
  if (!st) return NULL;
  pthread_mutex_init(&st->mu, NULL);
  st->epfd = st->ctlfd = -1;
  napi_set_instance_data(env, st, state_finalize, NULL);
  napi_add_env_cleanup_hook(env, teardown, st);

  for (size_t k = 0; k < ncalls; k++) {
    if (!define(env, exports, calls[k].name, engine_dispatch, (void *)&calls[k])) goto fail;
  }
  if (!define(env, exports, "executionWatchFd", js_execution_watch_fd, NULL) ||
      !define(env, exports, "cellWatchFd", js_cell_watch_fd, NULL))
    goto fail;

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
fail:
  napi_throw_error(env, "internal", "cannot define the addon's functions");
  return NULL;
}
