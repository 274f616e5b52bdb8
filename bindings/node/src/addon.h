/*
 * addon.h: what the files of the Node addon share.
 *
 *   addon.c   the module: its exports (calls.c's table, the poller's two
 *             functions, the constants) and the environment's teardown
 *   calls.c   the table: one row per function of include/boxlite.h, naming
 *             its JS function, its arguments, whether it blocks, the call
 *             itself and how its result becomes a JS value
 *   engine.c  the one engine every row runs on: reads the arguments the row
 *             names, makes the call on the JS thread or on libuv's pool
 *             (then it returns a Promise), and hands back the result or a
 *             typed error
 *   poller.c  readiness of execution and cell fds (epoll on one thread per
 *             JS environment), for the event loop
 *   values.c  JS <-> C values: arguments, handles, errors, results
 */
#ifndef BOXLITE_NODE_ADDON_H
#define BOXLITE_NODE_ADDON_H

#define NAPI_VERSION 8
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <node_api.h>

#include "boxlite.h"

#define MAX_ARGS 4
#define MAX_STRS 3
#define READ_CAP_MAX (16u << 20)
#define SCRATCH (64u << 10)

/* ---------- handles ---------- */

/* Handles are N-API externals with a type tag per kind; the library handle
 * inside is a token, never a pointer, so a freed handle passed again gets
 * the library's typed error. */
enum kind { K_RUNTIME = 1, K_BOX = 2, K_EXEC = 3, K_SESSION = 4, K_CELL = 5, K_FORWARDER = 6 };
extern const char *const kind_names[];

struct watch;
typedef struct handle {
  int kind;
  void *h;                /* the library's token */
  int freed;              /* freed through the raw *Free function */
  struct watch *watch;    /* executions and cells: the pending watchFd, if any */
  struct handle *next_rt; /* runtimes: the list freed at environment teardown */
} handle_t;

/* Per JS environment (main thread or a worker_thread). */
typedef struct state {
  pthread_mutex_t mu;
  int epfd, ctlfd, started, stopping;
  pthread_t thread;
  napi_threadsafe_function tsfn;
  int pending; /* watches not yet settled; the TSFN is ref'd while > 0 */
  uint64_t next_id;
  struct watch *watches;
  handle_t *runtimes;
  uint8_t scratch[SCRATCH]; /* reads that do not block land here */
} state_t;

state_t *get_state(napi_env env);

/* ---------- the table and the engine ---------- */

/* What a JS argument is read as, and where it goes in the work item. */
enum arg_type {
  A_HANDLE = 1,    /* a handle of arg.kind: w->hd, w->h */
  A_STR,           /* a string: the next of w->s[] */
  A_STR_OR_NULL,   /* a string, or null/undefined for NULL */
  A_INT,           /* an int32: the next of w->i[] */
  A_BOOL_OR_UNDEF, /* a boolean (undefined: false): the next of w->i[] */
  A_TIMEOUT,       /* milliseconds, < 0 or Infinity waits: w->timeout_ms */
  A_CAP,           /* bytes to read, 1..READ_CAP_MAX: w->cap and w->buf */
  A_BYTES,         /* a Buffer or Uint8Array, copied: w->buf, w->n */
};

typedef struct arg {
  unsigned char type; /* enum arg_type */
  unsigned char kind; /* A_HANDLE: enum kind */
  const char *name;   /* the parameter, for TypeErrors */
} arg_t;

/* When the call runs. */
enum mode {
  M_SYNC = 1, /* on the JS thread: the call does not block */
  M_ASYNC,    /* on libuv's pool: the JS function returns a Promise */
  M_POLL,     /* on the JS thread when the timeout is 0, else on the pool */
};

/* Flags of a call. */
#define F_SOFT 1 /* a status >= 100 (BOXLITE_AGAIN, BOXLITE_EOF) is a result: the number */
#define F_FREE 2 /* frees the handle: its watch ends, a second free is a no-op */

/* One call in flight: the arguments read, the outputs of the call. */
typedef struct work {
  napi_async_work aw;
  napi_deferred d;
  napi_ref ref; /* keeps the handle argument alive while the work runs */
  const struct call *call;
  handle_t *hd;
  void *h; /* hd->h, or NULL for a handle already freed (F_FREE) */
  char *s[MAX_STRS];
  int i[2];
  int64_t timeout_ms;
  uint8_t *buf;
  size_t cap, n;
  int scratch; /* buf is the state's scratch buffer */
  /* outputs */
  int rc;
  char *errmsg;
  const char *cstr; /* a static or library-owned string */
  char *out_str;    /* freed with boxlite_string_free */
  void *out_h;
  boxlite_result_t *res;
  boxlite_exit_t exit;
  int out_int;
  int stream;
} work_t;

/* The call of a row, with the work item's arguments; any thread. */
typedef int call_fn(work_t *w, boxlite_error_t **err);
/* The JS value of a call that returned BOXLITE_OK; the JS thread. */
typedef napi_value result_fn(napi_env env, work_t *w);

typedef struct call {
  const char *name;   /* the JS function */
  int mode;           /* enum mode */
  int flags;          /* F_* */
  call_fn *fn;
  result_fn *result;
  arg_t args[MAX_ARGS];
} call_t;

extern const call_t calls[];
extern const size_t ncalls;

/* The napi_callback of every row: data is its call_t. */
napi_value engine_dispatch(napi_env env, napi_callback_info info);

/* ---------- values.c ---------- */

napi_value make_error(napi_env env, const char *code, const char *msg);
napi_value undefined(napi_env env);
napi_value str_or_null(napi_env env, const char *s);

handle_t *get_handle(napi_env env, napi_value v, int kind, const char *param);
char *get_string(napi_env env, napi_value v, const char *param, int allow_null, int *isnull);
int get_int(napi_env env, napi_value v, const char *param, int *out);
int get_timeout(napi_env env, napi_value v, const char *param, int64_t *out);
int get_bool_or_undef(napi_env env, napi_value v, const char *param, int *out);
uint8_t *get_bytes(napi_env env, napi_value v, const char *param, size_t *len);

/* Result builders: a string the library made (r_string) or owns (r_cstring),
 * an int, a new handle of a kind, a run's result, a read's bytes or chunk,
 * a wait's exit. */
result_fn r_undefined, r_cstring, r_string, r_int, r_runtime, r_box, r_execution, r_session, r_cell, r_forwarder, r_result,
    r_bytes, r_chunk, r_exit;
napi_value run_result(napi_env env, const boxlite_result_t *r);

/* ---------- poller.c ---------- */

napi_value js_execution_watch_fd(napi_env env, napi_callback_info info);
napi_value js_cell_watch_fd(napi_env env, napi_callback_info info);
/* Drops a pending watch of hd, rejecting it with "closed"; JS thread only. */
void unwatch(napi_env env, handle_t *hd);
/* Stops the poller thread (environment teardown). */
void poller_stop(state_t *st);

#endif
