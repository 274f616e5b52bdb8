/* The C tests' harness: CHECK counts and reports, expect checks a status and
 * its error object. Each test program includes it once. */
#ifndef BOXLITE_TEST_CHECK_H
#define BOXLITE_TEST_CHECK_H
#include <stdio.h>
#include <stdlib.h>

#include "boxlite.h"

static int failures, checks;

#define CHECK(cond, ...)                                  \
  do {                                                    \
    checks++;                                             \
    if (!(cond)) {                                        \
      failures++;                                         \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                       \
      fputc('\n', stderr);                                \
    }                                                     \
  } while (0)

/* expect checks a call's status and error object, then frees the error and
 * resets *errp. (It takes errp, not err: C evaluates arguments in any order,
 * so err could be read before the call sets it.) */
static void expect(int rc, boxlite_error_t **errp, int want, const char *what) {
  boxlite_error_t *err = *errp;
  *errp = NULL;
  CHECK(rc == want, "%s: got %s (%s), want %s", what, boxlite_status_name(rc),
        err ? err->message : "no message", boxlite_status_name(want));
  if (want != BOXLITE_OK && want < 100) {
    CHECK(err && err->code == want && err->message && *err->message, "%s: error object", what);
  }
  boxlite_error_free(err);
}

/* expect_msg is expect for an error whose message must name something
 * (the unknown key of an option). */
#include <string.h>
static __attribute__((unused)) void expect_msg(int rc, boxlite_error_t **errp, int want, const char *needle, const char *what) {
  boxlite_error_t *err = *errp;
  CHECK(err && err->message && strstr(err->message, needle), "%s: message %s does not name %s", what,
        err && err->message ? err->message : "(none)", needle);
  expect(rc, errp, want, what);
}

/* runtime_in opens a runtime on home (a mkdtemp template, filled in) and
 * loads the image archive at image into it; *loaded (may be NULL) gets the
 * loaded images' JSON, freed by the caller. NULL when either fails. */
static boxlite_runtime_t *runtime_in(char *home, const char *image, char **loaded) {
  if (!mkdtemp(home)) return NULL;
  char opts[256];
  snprintf(opts, sizeof opts, "{\"home\":\"%s\"}", home);
  boxlite_runtime_t *rt = NULL;
  boxlite_error_t *err = NULL;
  int rc = boxlite_runtime_new(opts, &rt, &err);
  expect(rc, &err, BOXLITE_OK, "runtime_new");
  if (rc) return NULL;
  char *json = NULL;
  rc = boxlite_image_load(rt, image, &json, &err);
  expect(rc, &err, BOXLITE_OK, "image_load");
  if (loaded) {
    *loaded = json;
  } else {
    boxlite_string_free(json);
  }
  if (rc) {
    boxlite_runtime_free(rt);
    return NULL;
  }
  return rt;
}
#endif
