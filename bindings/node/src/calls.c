/*
 * calls.c: the raw layer's functions, one row per function of
 * include/boxlite.h (the _free functions of errors, strings and results are
 * called by the engine, never from JS; test/addon.test.js fails when the
 * header has a function no row calls).
 *
 * A row is
 *   X(jsName, mode, flags, result, call, arguments...)
 * mode   SYNC (does not block: on the JS thread), ASYNC (blocks: on libuv's
 *        pool, returns a Promise) or POLL (a read or wait: on the JS thread
 *        when its timeoutMs is 0, else on the pool)
 * flags  F_SOFT: BOXLITE_AGAIN / BOXLITE_EOF are results (numbers), not
 *        errors; F_FREE: frees the handle (a pending watchFd ends with
 *        "closed"; freeing twice is a no-op)
 * result how a BOXLITE_OK outcome becomes a JS value (values.c: r_string for
 *        a char ** the library allocated, r_box for a new box handle, ...)
 * call   the C call, an expression of the work item w (S0..S2 the string
 *        arguments in order, I0/I1 the int ones, H the handle's token) and
 *        err; the compiler checks it against the header
 * arguments  in JS order: RT, BOX, EX, SESSION, CELL, FWD (a handle of that
 *        kind), STR(name), STR_OR_NULL(name), INT(name), BOOL(name),
 *        TIMEOUT, CAP, BYTES(name); a wrong type is a TypeError naming it
 *
 * The engine (engine.c) runs every row the same way.
 */
#include <stdlib.h>
#include <string.h>

#include "addon.h"

#define S0 w->s[0]
#define S1 w->s[1]
#define S2 w->s[2]
#define I0 w->i[0]
#define I1 w->i[1]
#define H w->h
#define OUT(type) ((type **)&w->out_h)
#define OUT_STR (&w->out_str)
/* a call that cannot fail */
#define OK(expr) ((expr), BOXLITE_OK)
/* a free of the row's handle; H is NULL when it was freed already */
#define FREE(fn) OK(H ? fn(H) : (void)0)

#define RT {A_HANDLE, K_RUNTIME, "rt"}
#define BOX {A_HANDLE, K_BOX, "box"}
#define EX {A_HANDLE, K_EXEC, "ex"}
#define SESSION {A_HANDLE, K_SESSION, "session"}
#define CELL {A_HANDLE, K_CELL, "cell"}
#define FWD {A_HANDLE, K_FORWARDER, "forwarder"}
#define STR(name) {A_STR, 0, name}
#define STR_OR_NULL(name) {A_STR_OR_NULL, 0, name}
#define INT(name) {A_INT, 0, name}
#define BOOL(name) {A_BOOL_OR_UNDEF, 0, name}
#define TIMEOUT {A_TIMEOUT, 0, "timeoutMs"}
#define CAP {A_CAP, 0, "cap"}
#define BYTES(name) {A_BYTES, 0, name}

/* The id of a box or execution handle (static while the handle lives). */
static int handle_id(work_t *w, const char *id) {
  w->cstr = id;
  if (id) return BOXLITE_OK;
  w->errmsg = strdup("handle is not valid (freed)");
  return BOXLITE_ERR_INVALID_ARGUMENT;
}

/* clang-format off */
#define CALLS(X)                                                                                              \
  /* library */                                                                                               \
  X(version,            SYNC,  0,      r_cstring,   OK(w->cstr = boxlite_version()))                          \
  X(statusName,         SYNC,  0,      r_cstring,   OK(w->cstr = boxlite_status_name(I0)), INT("code"))       \
  /* runtime */                                                                                               \
  X(runtimeNew,         ASYNC, 0,      r_runtime,   boxlite_runtime_new(S0, OUT(boxlite_runtime_t), err),     \
    STR_OR_NULL("optionsJson"))                                                                               \
  X(runtimeNewRest,     ASYNC, 0,      r_runtime,   boxlite_runtime_new_rest(S0, OUT(boxlite_runtime_t), err),\
    STR("optionsJson"))                                                                                       \
  X(runtimeFree,        ASYNC, F_FREE, r_undefined, FREE(boxlite_runtime_free), RT)                           \
  X(runtimeMetrics,     SYNC,  0,      r_string,    boxlite_runtime_metrics(H, OUT_STR, err), RT)             \
  X(imageLoad,          ASYNC, 0,      r_string,    boxlite_image_load(H, S0, OUT_STR, err), RT, STR("path")) \
  X(imageList,          SYNC,  0,      r_string,    boxlite_image_list(H, OUT_STR, err), RT)                  \
  X(imagePull,          ASYNC, 0,      r_string,    boxlite_image_pull(H, S0, OUT_STR, err), RT, STR("reference")) \
  X(imageRemove,        ASYNC, 0,      r_undefined, boxlite_image_remove(H, S0, err), RT, STR("reference"))     \
  X(boxList,            ASYNC, 0,      r_string,    boxlite_box_list(H, OUT_STR, err), RT)                    \
  X(boxCreate,          ASYNC, 0,      r_box,       boxlite_box_create(H, S0, OUT(boxlite_box_t), err),       \
    RT, STR("optionsJson"))                                                                                   \
  X(boxGet,             ASYNC, 0,      r_box,       boxlite_box_get(H, S0, OUT(boxlite_box_t), err),          \
    RT, STR("idOrName"))                                                                                      \
  X(runtimeImportBox,   ASYNC, 0,      r_box,       boxlite_runtime_import_box(H, S0, S1, S2, OUT(boxlite_box_t), err), \
    RT, STR("archivePath"), STR_OR_NULL("name"), STR_OR_NULL("optionsJson"))                                  \
  /* boxes */                                                                                                 \
  X(boxId,              SYNC,  0,      r_cstring,   handle_id(w, boxlite_box_id(H)), BOX)                     \
  X(boxInfo,            SYNC,  0,      r_string,    boxlite_box_info(H, OUT_STR, err), BOX)                   \
  X(boxStart,           ASYNC, 0,      r_undefined, boxlite_box_start(H, err), BOX)                           \
  X(boxStop,            ASYNC, 0,      r_undefined, boxlite_box_stop(H, err), BOX)                            \
  X(boxPause,           ASYNC, 0,      r_string,    boxlite_box_pause(H, OUT_STR, err), BOX)                  \
  X(boxResume,          ASYNC, 0,      r_undefined, boxlite_box_resume(H, err), BOX)                          \
  X(boxRemove,          ASYNC, 0,      r_undefined, boxlite_box_remove(H, I0, err), BOX, BOOL("force"))       \
  X(boxMetrics,         ASYNC, 0,      r_string,    boxlite_box_metrics(H, OUT_STR, err), BOX)                \
  X(boxCopyIn,          ASYNC, 0,      r_undefined, boxlite_box_copy_in(H, S0, S1, S2, err),                  \
    BOX, STR("src"), STR("dest"), STR("optionsJson"))                                                         \
  X(boxCopyOut,         ASYNC, 0,      r_undefined, boxlite_box_copy_out(H, S0, S1, S2, err),                 \
    BOX, STR("src"), STR("dest"), STR("optionsJson"))                                                         \
  X(boxFree,            SYNC,  F_FREE, r_undefined, FREE(boxlite_box_free), BOX)                              \
  /* tunnels */                                                                                               \
  X(boxTunnelConnect,   ASYNC, 0,      r_int,       boxlite_box_tunnel_connect(H, I0, &w->out_int, err),      \
    BOX, INT("port"))                                                                                         \
  X(boxTunnelForward,   ASYNC, 0,      r_forwarder, boxlite_box_tunnel_forward(H, I0, S0, OUT(boxlite_forwarder_t), err), \
    BOX, INT("port"), STR("listenJson"))                                                                      \
  X(forwarderLocalAddr, SYNC,  0,      r_string,    boxlite_forwarder_local_addr(H, OUT_STR, err), FWD)       \
  X(forwarderWait,      POLL,  F_SOFT, r_undefined, boxlite_forwarder_wait(H, w->timeout_ms, err), FWD, TIMEOUT) \
  X(forwarderClose,     ASYNC, 0,      r_undefined, boxlite_forwarder_close(H, err), FWD)                     \
  X(forwarderFree,      SYNC,  F_FREE, r_undefined, FREE(boxlite_forwarder_free), FWD)                        \
  X(boxUpdateOutbound,  ASYNC, 0,      r_undefined, boxlite_box_update_outbound(H, S0, err), BOX, STR("specJson")) \
  X(boxUpdateInbound,   ASYNC, 0,      r_undefined, boxlite_box_update_inbound(H, S0, err), BOX, STR("specJson")) \
  /* snapshots, clones, archives (disk copies: they block) */                                                 \
  X(boxSnapshotCreate,  ASYNC, 0,      r_string,    boxlite_box_snapshot_create(H, S0, OUT_STR, err),         \
    BOX, STR_OR_NULL("name"))                                                                                 \
  X(boxSnapshotCreateWith, ASYNC, 0,   r_string,    boxlite_box_snapshot_create_with(H, S0, S1, OUT_STR, err), \
    BOX, STR_OR_NULL("name"), STR_OR_NULL("optionsJson"))                                                     \
  X(boxSnapshotList,    ASYNC, 0,      r_string,    boxlite_box_snapshot_list(H, OUT_STR, err), BOX)          \
  X(boxSnapshotGet,     ASYNC, 0,      r_string,    boxlite_box_snapshot_get(H, S0, OUT_STR, err),            \
    BOX, STR("name"))                                                                                         \
  X(boxSnapshotRemove,  ASYNC, 0,      r_undefined, boxlite_box_snapshot_remove(H, S0, err), BOX, STR("name")) \
  X(boxSnapshotRestore, ASYNC, 0,      r_undefined, boxlite_box_snapshot_restore(H, S0, err), BOX, STR("name")) \
  X(boxClone,           ASYNC, 0,      r_box,       boxlite_box_clone(H, S0, OUT(boxlite_box_t), err),        \
    BOX, STR_OR_NULL("optionsJson"))                                                                          \
  X(boxFork,            ASYNC, 0,      r_string,    boxlite_box_fork(H, S0, OUT_STR, err),                    \
    BOX, STR_OR_NULL("optionsJson"))                                                                          \
  X(boxExport,          ASYNC, 0,      r_string,    boxlite_box_export(H, S0, OUT_STR, err), BOX, STR("dest")) \
  /* executions */                                                                                            \
  X(boxExec,            SYNC,  0,      r_execution, boxlite_box_exec(H, S0, OUT(boxlite_execution_t), err),   \
    BOX, STR("commandJson"))                                                                                  \
  X(boxRun,             ASYNC, 0,      r_result,    boxlite_box_run(H, S0, &w->res, err),                     \
    BOX, STR("commandJson"))                                                                                  \
  X(executionId,        SYNC,  0,      r_cstring,   handle_id(w, boxlite_execution_id(H)), EX)                \
  X(executionFd,        SYNC,  0,      r_int,       OK(w->out_int = boxlite_execution_fd(H)), EX)             \
  X(executionRead,      POLL,  F_SOFT, r_bytes,                                                               \
    boxlite_execution_read(H, I0, w->buf, w->cap, w->timeout_ms, &w->n, err),                                 \
    EX, INT("stream"), CAP, TIMEOUT)                                                                          \
  X(executionWrite,     ASYNC, 0,      r_undefined, boxlite_execution_write(H, w->buf, w->n, err),            \
    EX, BYTES("data"))                                                                                        \
  X(executionCloseStdin, SYNC, 0,      r_undefined, boxlite_execution_close_stdin(H, err), EX)                \
  X(executionWait,      POLL,  F_SOFT, r_exit,      boxlite_execution_wait(H, w->timeout_ms, &w->exit, err),  \
    EX, TIMEOUT)                                                                                              \
  X(executionSignal,    SYNC,  0,      r_undefined, boxlite_execution_signal(H, I0, err), EX, INT("signal"))  \
  X(executionKill,      SYNC,  0,      r_undefined, boxlite_execution_kill(H, err), EX)                       \
  X(executionResize,    SYNC,  0,      r_undefined, boxlite_execution_resize(H, I0, I1, err),                 \
    EX, INT("rows"), INT("cols"))                                                                             \
  X(executionFree,      SYNC,  F_FREE, r_undefined, FREE(boxlite_execution_free), EX)                         \
  /* sessions */                                                                                              \
  X(sessionNew,         ASYNC, 0,      r_session,   boxlite_session_new(H, S0, S1, OUT(boxlite_session_t), err), \
    BOX, STR("kind"), STR_OR_NULL("optionsJson"))                                                             \
  X(sessionRun,         ASYNC, 0,      r_string,    boxlite_session_run(H, S0, S1, OUT_STR, err),             \
    SESSION, STR("code"), STR_OR_NULL("optionsJson"))                                                         \
  X(sessionRunStart,    ASYNC, 0,      r_cell,      boxlite_session_run_start(H, S0, S1, OUT(boxlite_cell_t), err), \
    SESSION, STR("code"), STR_OR_NULL("optionsJson"))                                                         \
  X(sessionExec,        ASYNC, 0,      r_result,    boxlite_session_exec(H, S0, &w->res, err),                \
    SESSION, STR("commandJson"))                                                                              \
  X(sessionRunCode,     ASYNC, 0,      r_string,    boxlite_session_run_code(H, S0, S1, OUT_STR, err),        \
    SESSION, STR("code"), STR_OR_NULL("optionsJson"))                                                         \
  X(sessionInterrupt,   SYNC,  0,      r_undefined, boxlite_session_interrupt(H, err), SESSION)               \
  X(sessionReset,       ASYNC, 0,      r_undefined, boxlite_session_reset(H, err), SESSION)                   \
  X(sessionInfo,        SYNC,  0,      r_string,    boxlite_session_info(H, OUT_STR, err), SESSION)           \
  X(sessionFree,        SYNC,  F_FREE, r_undefined, FREE(boxlite_session_free), SESSION)                      \
  /* cells: a session's code, read while it runs */                                                           \
  X(cellRead,           POLL,  F_SOFT, r_chunk,                                                               \
    boxlite_cell_read(H, w->buf, w->cap, w->timeout_ms, &w->stream, &w->n, err), CELL, CAP, TIMEOUT)          \
  X(cellFd,             SYNC,  0,      r_int,       OK(w->out_int = boxlite_cell_fd(H)), CELL)                \
  X(cellResult,         POLL,  F_SOFT, r_string,    boxlite_cell_result(H, w->timeout_ms, OUT_STR, err),      \
    CELL, TIMEOUT)                                                                                            \
  X(cellInterrupt,      SYNC,  0,      r_undefined, boxlite_cell_interrupt(H, err), CELL)                     \
  X(cellFree,           SYNC,  F_FREE, r_undefined, FREE(boxlite_cell_free), CELL)
/* clang-format on */

/* Each row's call as a function of the work item. */
#define THUNK(js, mode, flags, result, call, ...)                  \
  static int call_##js(work_t *w, boxlite_error_t **err) {        \
    (void)w;                                                      \
    (void)err;                                                    \
    return call;                                                  \
  }
CALLS(THUNK)
#undef THUNK

/* The table the module exports (addon.c). */
#define ROW(js, mode, flags, result, call, ...) {#js, M_##mode, flags, call_##js, result, {__VA_ARGS__}},
const call_t calls[] = {CALLS(ROW)};
#undef ROW

const size_t ncalls = sizeof calls / sizeof calls[0];
