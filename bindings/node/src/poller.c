/*
 * poller.c: readiness of execution and cell fds, the Node counterpart of
 * Python's loop.add_reader.
 *
 * executionWatchFd(ex) / cellWatchFd(cell) return a Promise that resolves
 * once boxlite_execution_fd / boxlite_cell_fd is readable (one-shot: call
 * again to wait again), and rejects with code "closed" if the handle is freed
 * meanwhile; one watch per handle. One poller thread per JS environment
 * (epoll, one-shot) sees readiness and hands it to the JS thread with a
 * napi_threadsafe_function; the JS side then reads with timeout 0. That keeps
 * libuv's 4 pool threads free however many executions stream at once.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "addon.h"

typedef struct watch {
  uint64_t id;
  handle_t *hd;
  int fd;
  int fired;
  napi_deferred d;
  napi_ref ref;
  struct watch *next;
} watch_t;

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

void poller_stop(state_t *st) {
  if (!st->started) return;
  pthread_mutex_lock(&st->mu);
  st->stopping = 1;
  pthread_mutex_unlock(&st->mu);
  uint64_t one = 1;
  if (write(st->ctlfd, &one, sizeof one) < 0) { /* the thread may be gone */ }
  pthread_join(st->thread, NULL);
  close(st->epfd);
  close(st->ctlfd);
  napi_release_threadsafe_function(st->tsfn, napi_tsfn_abort);
  st->started = 0;
}

static napi_value watch_fd(napi_env env, napi_callback_info info, int kind) {
  napi_value a[1], promise;
  size_t argc = 1;
  if (napi_get_cb_info(env, info, &argc, a, NULL, NULL) != napi_ok) return NULL;
  if (argc < 1) napi_get_undefined(env, &a[0]);
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

napi_value js_execution_watch_fd(napi_env env, napi_callback_info info) { return watch_fd(env, info, K_EXEC); }

napi_value js_cell_watch_fd(napi_env env, napi_callback_info info) { return watch_fd(env, info, K_CELL); }

void unwatch(napi_env env, handle_t *hd) {
  if (!hd->watch) return; /* only the JS thread sets it */
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
