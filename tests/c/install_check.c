/* A program as a user of an installed boxlite writes it: compiled against the
 * installed prefix with `pkg-config --cflags --libs boxlite` and run with no
 * BOXLITE_ASSETS, so the library finds its shim, network stack, virtiofsd and
 * guest where `cmake --install` put them. It boots a box with a volume (the
 * file daemon), reads a host file in the box and writes one back.
 *   install_check HOME IMAGE.tar HOSTDIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <boxlite.h>

static int fail(const char *what, int rc, boxlite_error_t *err) {
  fprintf(stderr, "install_check: %s: %s (%s)\n", what, boxlite_status_name(rc), err && err->message ? err->message : "");
  boxlite_error_free(err);
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: install_check HOME IMAGE.tar HOSTDIR\n");
    return 2;
  }
  char opts[4096];
  boxlite_error_t *err = NULL;
  boxlite_runtime_t *rt = NULL;
  snprintf(opts, sizeof opts, "{\"home\":\"%s\"}", argv[1]);
  int rc = boxlite_runtime_new(opts, &rt, &err);
  if (rc != BOXLITE_OK) return fail("runtime_new", rc, err);
  char *json = NULL;
  rc = boxlite_image_load(rt, argv[2], &json, &err);
  if (rc != BOXLITE_OK) return fail("image_load", rc, err);
  boxlite_string_free(json);

  boxlite_box_t *box = NULL;
  snprintf(opts, sizeof opts,
           "{\"image\":\"alpine:latest\",\"memory_mib\":256,\"volumes\":[{\"host_path\":\"%s\",\"guest_path\":\"/mnt/host\"}]}", argv[3]);
  rc = boxlite_box_create(rt, opts, &box, &err);
  if (rc != BOXLITE_OK) return fail("box_create", rc, err);
  boxlite_result_t *res = NULL;
  rc = boxlite_box_run(box, "{\"argv\":[\"sh\",\"-c\",\"cat /mnt/host/in.txt && echo written in the box > /mnt/host/out.txt\"]}", &res, &err);
  if (rc != BOXLITE_OK) return fail("box_run", rc, err);
  int ok = res->exit.exit_code == 0;
  fwrite(res->stdout_data, 1, res->stdout_len, stdout);
  fwrite(res->stderr_data, 1, res->stderr_len, stderr);
  boxlite_result_free(res);
  rc = boxlite_box_remove(box, 1, &err);
  if (rc != BOXLITE_OK) return fail("box_remove", rc, err);
  boxlite_box_free(box);
  boxlite_runtime_free(rt);
  printf("libboxlite %s\n", boxlite_version());
  return ok ? 0 : 1;
}
