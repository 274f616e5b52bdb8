/*
 * baseline.c: bench.js's baseline, the C ABI's own exec round trip. Not part
 * of the package: bench.js compiles it against native/libboxlite.so.
 *
 *   baseline HOME BOX_ID N   runs `true` N times with boxlite_box_run on the
 *                            box (attached by id, as a second process of the
 *                            same home) and prints each call's nanoseconds
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "boxlite.h"

static int fail(boxlite_error_t *err) {
  fprintf(stderr, "baseline: %s\n", err && err->message ? err->message : "failed");
  boxlite_error_free(err);
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: baseline HOME BOX_ID N\n");
    return 2;
  }
  char opts[4096];
  /* HOME comes from bench.js: a path without quotes or backslashes */
  if (strpbrk(argv[1], "\"\\") || snprintf(opts, sizeof opts, "{\"home\": \"%s\"}", argv[1]) >= (int)sizeof opts) {
    fprintf(stderr, "baseline: unusable home path\n");
    return 2;
  }
  int n = atoi(argv[3]);
  boxlite_runtime_t *rt = NULL;
  boxlite_box_t *box = NULL;
  boxlite_error_t *err = NULL;
  if (boxlite_runtime_new(opts, &rt, &err) || boxlite_box_get(rt, argv[2], &box, &err)) return fail(err);
  for (int i = 0; i < n; i++) {
    struct timespec a, b;
    boxlite_result_t *res = NULL;
    clock_gettime(CLOCK_MONOTONIC, &a);
    if (boxlite_box_run(box, "{\"argv\":[\"true\"]}", &res, &err)) return fail(err);
    clock_gettime(CLOCK_MONOTONIC, &b);
    boxlite_result_free(res);
    printf("%lld\n", (long long)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec));
  }
  boxlite_box_free(box);
  boxlite_runtime_free(rt);
  return 0;
}
