/* C ABI tests against real boxes: the happy path, streaming with poll(2),
 * and bad input (NULL, freed and mistyped handles, bad JSON) that must give
 * typed errors and never crash. Needs BOXLITE_TEST_IMAGE and BOXLITE_ASSETS. */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "boxlite.h"
#include "check.h"


static void test_bad_input(boxlite_runtime_t *rt, boxlite_box_t *box) {
  boxlite_error_t *err = NULL;
  boxlite_box_t *b = NULL;
  boxlite_execution_t *ex = NULL;
  char *json = NULL;

  expect(boxlite_box_create(NULL, "{\"image\":\"alpine:latest\"}", &b, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "NULL runtime");
  expect(boxlite_box_create(rt, NULL, &b, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "NULL options");
  expect(boxlite_box_create(rt, "{not json", &b, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "bad JSON");
  expect(boxlite_box_create(rt, "{\"image\":\"alpine:latest\",\"memroy_mib\":5}", &b, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "unknown field");
  expect(boxlite_box_create(rt, "{\"image\":\"alpine:latest\",\"cpus\":\"two\"}", &b, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "wrong type");
  /* Unknown keys at every depth are errors naming the key; so is a second value after the object. */
  expect_msg(boxlite_box_create(rt, "{\"image\":\"alpine:latest\",\"network\":{\"mode\":\"enabled\",\"alow_net\":[\"x\"]}}", &b, &err), &err,
             BOXLITE_ERR_INVALID_ARGUMENT, "alow_net", "nested unknown field");
  expect_msg(boxlite_box_create(rt, "{\"image\":\"alpine:latest\",\"ports\":[{\"guest_port\":80,\"hostport\":1}]}", &b, &err), &err,
             BOXLITE_ERR_INVALID_ARGUMENT, "hostport", "unknown field in a list");
  expect_msg(boxlite_box_exec(box, "{\"argv\":[\"true\"],\"timeout\":1}", &ex, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "timeout",
             "unknown command field");
  expect_msg(boxlite_box_create(rt, "{\"image\":\"alpine:latest\"} {\"memory_mib\":64}", &b, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT,
             "after", "trailing JSON");
  /* Advanced options (docs/security-options.md): checked before anything boots, naming what is wrong. */
  expect_msg(boxlite_box_create(rt, "{\"image\":\"alpine:latest\",\"advanced\":{\"capabilities\":{\"add\":[\"NET_ADMN\"]}}}", &b, &err), &err,
             BOXLITE_ERR_INVALID_ARGUMENT, "NET_ADMN", "unknown capability");
  expect_msg(boxlite_box_create(rt, "{\"image\":\"alpine:latest\",\"advanced\":{\"security\":{\"max_files\":5}}}", &b, &err), &err,
             BOXLITE_ERR_INVALID_ARGUMENT, "max_files", "unknown security field");
  expect_msg(boxlite_box_create(rt, "{\"image\":\"alpine:latest\",\"advanced\":{\"health_check\":{\"retries\":0}}}", &b, &err), &err,
             BOXLITE_ERR_INVALID_ARGUMENT, "retries", "health check retries");
  expect_msg(boxlite_box_create(rt, "{\"image\":\"alpine:latest\",\"advanced\":{\"security\":{\"network_enabled\":false}}}", &b, &err), &err,
             BOXLITE_ERR_UNSUPPORTED, "network_enabled", "network_enabled=false");
  {
    boxlite_runtime_t *r2 = NULL;
    expect_msg(boxlite_runtime_new("{\"image_registries\":[{\"host\":\"127.0.0.1:5000\",\"username\":\"u\"}]}", &r2, &err), &err,
               BOXLITE_ERR_INVALID_ARGUMENT, "password", "a registry username without a password");
    expect_msg(boxlite_runtime_new("{\"image_registries\":[{\"host\":\"127.0.0.1:5000\",\"passwd\":\"p\"}]}", &r2, &err), &err,
               BOXLITE_ERR_INVALID_ARGUMENT, "passwd", "unknown registry field");
  }
  expect(boxlite_box_create(rt, "{\"image\":\"127.0.0.1:9/nope:1\"}", &b, &err), &err, BOXLITE_ERR_UNREACHABLE, "missing image, no registry answering");
  /* Network options are checked before anything boots. */
  expect(boxlite_box_create(rt, "{\"image\":\"alpine:latest\",\"network\":{\"mode\":\"bridged\"}}", &b, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "bad network mode");
  expect(boxlite_box_create(rt, "{\"image\":\"alpine:latest\",\"network\":{\"mode\":\"disabled\"},\"ports\":[{\"guest_port\":80}]}", &b, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "ports without a network");
  expect(boxlite_box_create(rt, "{\"image\":\"alpine:latest\",\"ports\":[{\"guest_port\":70000}]}", &b, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "bad guest port");
  expect(boxlite_box_get(rt, "no-such-box", &b, &err), &err, BOXLITE_ERR_NOT_FOUND, "missing box");
  /* A box handle passed as a runtime, and made-up handles. */
  expect(boxlite_box_list((boxlite_runtime_t *)box, &json, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "mistyped handle");
  expect(boxlite_box_info((boxlite_box_t *)(uintptr_t)0xdeadbeef, &json, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "bogus handle");
  expect(boxlite_box_exec(box, "{\"argv\":[\"\"]}", &ex, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "empty command");
  expect(boxlite_box_exec(box, "{\"argv\":[\"true\"],\"timeout_secs\":-1}", &ex, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "negative timeout");
  /* errors may be ignored by passing NULL */
  CHECK(boxlite_box_info(NULL, &json, NULL) == BOXLITE_ERR_INVALID_ARGUMENT, "NULL err out-param");
  CHECK(boxlite_execution_fd(NULL) == -1, "fd of NULL");
  CHECK(boxlite_box_id(NULL) == NULL, "id of NULL");
  boxlite_box_free(NULL);
  boxlite_execution_free(NULL);
  boxlite_runtime_free(NULL);
  boxlite_error_free(NULL);
  boxlite_string_free(NULL);
  boxlite_result_free(NULL);

  /* A huge argument list is refused or run, never a crash. */
  size_t big = 4 << 20;
  char *cmd = malloc(big + 64);
  strcpy(cmd, "{\"argv\":[\"echo\",\"");
  memset(cmd + strlen(cmd), 'x', big);
  strcpy(cmd + 18 + big, "\"]}");
  boxlite_result_t *res = NULL;
  int rc = boxlite_box_run(box, cmd, &res, &err);
  CHECK(rc != BOXLITE_OK, "4 MiB argument accepted?");
  CHECK(rc == BOXLITE_ERR_LIMIT || rc == BOXLITE_ERR_INVALID_ARGUMENT, "4 MiB argument: %s (%s)", boxlite_status_name(rc), err ? err->message : "");
  boxlite_error_free(err);
  boxlite_result_free(res);
  free(cmd);
}

static void test_run(boxlite_box_t *box) {
  boxlite_error_t *err = NULL;
  boxlite_result_t *res = NULL;
  int rc = boxlite_box_run(box, "{\"argv\":[\"sh\",\"-c\",\"echo out; echo err >&2; exit 3\"]}", &res, &err);
  expect(rc, &err, BOXLITE_OK, "run");
  if (rc == BOXLITE_OK) {
    CHECK(res->exit.exit_code == 3, "exit code %d", res->exit.exit_code);
    CHECK(res->stdout_len == 4 && memcmp(res->stdout_data, "out\n", 4) == 0, "stdout %.*s", (int)res->stdout_len, res->stdout_data);
    CHECK(res->stderr_len == 4 && memcmp(res->stderr_data, "err\n", 4) == 0, "stderr");
    boxlite_result_free(res);
  }
  res = NULL;
  rc = boxlite_box_run(box, "{\"argv\":[\"sleep\",\"30\"],\"timeout_secs\":0.5}", &res, &err);
  expect(rc, &err, BOXLITE_OK, "run with timeout");
  if (rc == BOXLITE_OK) {
    CHECK(res->exit.timed_out == 1, "timed_out flag");
    boxlite_result_free(res);
  }
  res = NULL;
  rc = boxlite_box_run(box, "{\"argv\":[\"no-such-cmd\"]}", &res, &err);
  expect(rc, &err, BOXLITE_ERR_NOT_FOUND, "missing command");
}

/* After test_run, the first execs of a new box in a new runtime: both count
 * its three execs, the missing command as the one error, and the box its 8
 * bytes of output. */
static void test_metrics(boxlite_runtime_t *rt, boxlite_box_t *box) {
  boxlite_error_t *err = NULL;
  char *json = NULL;
  expect(boxlite_box_metrics(box, &json, &err), &err, BOXLITE_OK, "box_metrics");
  CHECK(json && strstr(json, "\"commands_executed_total\":3,\"exec_errors_total\":1,\"bytes_sent_total\":0,\"bytes_received_total\":8,") &&
            strstr(json, "\"memory_bytes\":") && !strstr(json, "\"memory_bytes\":null") && strstr(json, "\"stage_box_spawn_ms\":"),
        "box metrics %s", json ? json : "");
  boxlite_string_free(json);
  json = NULL;
  expect(boxlite_runtime_metrics(rt, &json, &err), &err, BOXLITE_OK, "runtime_metrics");
  CHECK(json && strcmp(json, "{\"boxes_created_total\":1,\"boxes_failed_total\":0,\"num_running_boxes\":1,"
                             "\"num_paused_boxes\":0,\"total_commands_executed\":3,\"total_exec_errors\":1}") == 0,
        "runtime metrics %s", json ? json : "");
  boxlite_string_free(json);
  expect(boxlite_box_metrics(box, NULL, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "box_metrics NULL out");
  expect(boxlite_runtime_metrics((boxlite_runtime_t *)box, &json, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "runtime_metrics of a box");
}

/* Pauses and resumes the box (info says paused between; an exec resumes it
 * too), then forks it once: the fork, opened by the id fork returns, has the
 * box's /tmp and a hostname of its own. */
static void test_pause_fork(boxlite_runtime_t *rt, boxlite_box_t *box) {
  boxlite_error_t *err = NULL;
  boxlite_result_t *res = NULL;
  char *json = NULL;
  int rc = boxlite_box_run(box, "{\"argv\":[\"sh\",\"-c\",\"echo kept > /tmp/k\"]}", &res, &err);
  expect(rc, &err, BOXLITE_OK, "run before pause");
  if (rc == BOXLITE_OK) boxlite_result_free(res);
  expect(boxlite_box_pause(box, &json, &err), &err, BOXLITE_OK, "pause");
  CHECK(json && strstr(json, "\"state_bytes\":") && strstr(json, "\"save_ms\":"), "pause info %s", json ? json : "");
  boxlite_string_free(json);
  json = NULL;
  expect(boxlite_box_info(box, &json, &err), &err, BOXLITE_OK, "info of the paused box");
  CHECK(json && strstr(json, "\"state\":\"paused\""), "paused box info %s", json ? json : "");
  boxlite_string_free(json);
  json = NULL;
  expect(boxlite_runtime_metrics(rt, &json, &err), &err, BOXLITE_OK, "runtime_metrics while paused");
  CHECK(json && strstr(json, "\"num_running_boxes\":0,\"num_paused_boxes\":1,"), "runtime metrics %s", json ? json : "");
  boxlite_string_free(json);
  expect(boxlite_box_pause(box, NULL, &err), &err, BOXLITE_OK, "pause of a paused box");
  expect(boxlite_box_resume(box, &err), &err, BOXLITE_OK, "resume");
  expect(boxlite_box_resume(box, &err), &err, BOXLITE_OK, "resume of a running box");
  expect(boxlite_box_pause(box, NULL, &err), &err, BOXLITE_OK, "pause again");
  res = NULL;
  rc = boxlite_box_run(box, "{\"argv\":[\"cat\",\"/tmp/k\"]}", &res, &err);
  expect(rc, &err, BOXLITE_OK, "run on the paused box");
  if (rc == BOXLITE_OK) {
    CHECK(res->stdout_len == 5 && memcmp(res->stdout_data, "kept\n", 5) == 0, "after resume: %.*s", (int)res->stdout_len, res->stdout_data);
    boxlite_result_free(res);
  }
  json = NULL;
  expect(boxlite_box_fork(box, "{\"count\":1,\"names\":[\"c-fork\"]}", &json, &err), &err, BOXLITE_OK, "fork");
  CHECK(json && strlen(json) == 16 && json[0] == '[' && json[1] == '"', "fork ids %s", json ? json : "");
  if (json && strlen(json) == 16) {
    char id[13];
    memcpy(id, json + 2, 12);
    id[12] = 0;
    boxlite_box_t *fork = NULL;
    expect(boxlite_box_get(rt, id, &fork, &err), &err, BOXLITE_OK, "get the fork");
    if (fork) {
      res = NULL;
      rc = boxlite_box_run(fork, "{\"argv\":[\"sh\",\"-c\",\"cat /tmp/k; hostname\"]}", &res, &err);
      expect(rc, &err, BOXLITE_OK, "run in the fork");
      if (rc == BOXLITE_OK) {
        CHECK(res->stdout_len == 12 && memcmp(res->stdout_data, "kept\nc-fork\n", 12) == 0, "fork: %.*s", (int)res->stdout_len, res->stdout_data);
        boxlite_result_free(res);
      }
      expect(boxlite_box_remove(fork, 1, &err), &err, BOXLITE_OK, "remove the fork");
      boxlite_box_free(fork);
    }
  }
  boxlite_string_free(json);
  json = NULL;
  expect(boxlite_box_fork(box, "{\"count\":0}", &json, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "fork of 0");
  expect(boxlite_box_fork(box, "{\"count\":1,\"bad\":1}", &json, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "fork: unknown option");
  expect(boxlite_box_fork(box, NULL, NULL, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "fork: out_json NULL");
}

/* Copies a file in and back out, checks docker cp's errors and bad input. */
static void test_copy(boxlite_box_t *box) {
  boxlite_error_t *err = NULL;
  char dir[] = "/tmp/bxc-copy.XXXXXX";
  if (!mkdtemp(dir)) return;
  char src[128], back[128], cmd[300];
  snprintf(src, sizeof src, "%s/hello.txt", dir);
  snprintf(back, sizeof back, "%s/back.txt", dir);
  FILE *f = fopen(src, "w");
  fputs("copied\n", f);
  fclose(f);
  expect(boxlite_box_copy_in(box, src, "/root/c-copy/", NULL, &err), &err, BOXLITE_OK, "copy_in");
  expect(boxlite_box_copy_in(box, src, "/root/c-copy/hello.txt", "{\"overwrite\":false}", &err), &err,
         BOXLITE_ERR_ALREADY_EXISTS, "copy_in without overwrite");
  expect(boxlite_box_copy_out(box, "/root/c-copy/hello.txt", back, "{\"max_bytes\":1024,\"timeout_secs\":60}", &err), &err,
         BOXLITE_OK, "copy_out");
  char got[32] = {0};
  f = fopen(back, "r");
  CHECK(f && fread(got, 1, sizeof got - 1, f) == 7 && strcmp(got, "copied\n") == 0, "copied back: %s", got);
  if (f) fclose(f);
  expect(boxlite_box_copy_out(box, "/no/such", back, NULL, &err), &err, BOXLITE_ERR_NOT_FOUND, "copy_out missing");
  expect(boxlite_box_copy_out(box, "/root/c-copy", back, "{\"max_entries\":-5}", &err), &err,
         BOXLITE_ERR_INVALID_ARGUMENT, "copy_out bad option");
  expect(boxlite_box_copy_out(box, "/root/c-copy", back, "{\"bogus\":1}", &err), &err,
         BOXLITE_ERR_INVALID_ARGUMENT, "copy_out unknown option");
  expect(boxlite_box_copy_in(box, NULL, "/x", NULL, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "copy_in NULL");
  expect(boxlite_box_copy_in(NULL, src, "/x", NULL, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "copy_in NULL box");
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  system(cmd);
}

/* Streams output with poll(2) on the execution's fd, the way an event loop does. */
static void test_stream(boxlite_box_t *box) {
  boxlite_error_t *err = NULL;
  boxlite_execution_t *ex = NULL;
  int rc = boxlite_box_exec(box, "{\"argv\":[\"sh\",\"-c\",\"read line; echo got:$line; i=0; while [ $i -lt 2000 ]; do echo line$i; i=$((i+1)); done; echo bye >&2\"],\"stdin\":true}", &ex, &err);
  expect(rc, &err, BOXLITE_OK, "exec");
  if (rc != BOXLITE_OK) return;
  expect(boxlite_execution_write(ex, (const uint8_t *)"hello\n", 6, &err), &err, BOXLITE_OK, "write stdin");
  expect(boxlite_execution_close_stdin(ex, &err), &err, BOXLITE_OK, "close stdin");
  int fd = boxlite_execution_fd(ex);
  CHECK(fd >= 0, "fd");
  size_t out_len = 0, err_len = 0;
  char *out = malloc(1 << 20), errbuf[64];
  int out_eof = 0, err_eof = 0, polls = 0;
  while (!(out_eof && err_eof) && polls < 100000) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    poll(&p, 1, 10000);
    polls++;
    for (;;) {
      size_t n = 0;
      if (!out_eof) {
        rc = boxlite_execution_read(ex, BOXLITE_STDOUT, (uint8_t *)out + out_len, (1 << 20) - out_len, 0, &n, NULL);
        if (rc == BOXLITE_OK) { out_len += n; continue; }
        if (rc == BOXLITE_EOF) out_eof = 1;
      }
      if (!err_eof) {
        rc = boxlite_execution_read(ex, BOXLITE_STDERR, (uint8_t *)errbuf + err_len, sizeof errbuf - err_len, 0, &n, NULL);
        if (rc == BOXLITE_OK) { err_len += n; continue; }
        if (rc == BOXLITE_EOF) err_eof = 1;
      }
      break; /* both AGAIN (or done): back to poll */
    }
  }
  CHECK(out_eof && err_eof, "streams did not end");
  CHECK(out_len > 10 && memcmp(out, "got:hello\nline0\n", 16) == 0, "stdout start %.16s", out);
  CHECK(out_len == 10 + 10 * 6 + 90 * 7 + 900 * 8 + 1000 * 9, "stdout length %zu", out_len); /* "lineN\n" */
  CHECK(err_len == 4 && memcmp(errbuf, "bye\n", 4) == 0, "stderr %.*s", (int)err_len, errbuf);
  boxlite_exit_t st;
  expect(boxlite_execution_wait(ex, -1, &st, &err), &err, BOXLITE_OK, "wait");
  CHECK(st.exit_code == 0 && st.signal == 0 && !st.timed_out, "exit %d", st.exit_code);
  free(out);
  boxlite_execution_free(ex);
  /* A freed execution handle is an error, not a crash. */
  expect(boxlite_execution_wait(ex, 0, &st, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "freed execution");

  /* wait with a deadline, then a signal. */
  rc = boxlite_box_exec(box, "{\"argv\":[\"sleep\",\"30\"]}", &ex, &err);
  expect(rc, &err, BOXLITE_OK, "exec sleep");
  if (rc != BOXLITE_OK) return;
  CHECK(boxlite_execution_wait(ex, 50, &st, NULL) == BOXLITE_AGAIN, "wait deadline");
  size_t n;
  uint8_t b[8];
  CHECK(boxlite_execution_read(ex, BOXLITE_STDOUT, b, sizeof b, 50, &n, NULL) == BOXLITE_AGAIN, "read deadline");
  CHECK(boxlite_execution_read(ex, 7, b, sizeof b, 0, &n, NULL) == BOXLITE_ERR_INVALID_ARGUMENT, "bad stream");
  CHECK(boxlite_execution_resize(ex, 24, 80, NULL) == BOXLITE_ERR_INVALID_STATE, "resize without a terminal");
  CHECK(boxlite_execution_write(ex, b, 1, NULL) == BOXLITE_ERR_INVALID_STATE, "write without stdin");
  expect(boxlite_execution_signal(ex, SIGTERM, &err), &err, BOXLITE_OK, "signal");
  expect(boxlite_execution_wait(ex, -1, &st, &err), &err, BOXLITE_OK, "wait signalled");
  CHECK(st.signal == SIGTERM && st.exit_code == 128 + SIGTERM, "signalled exit %d/%d", st.exit_code, st.signal);
  CHECK(boxlite_execution_signal(ex, 0, NULL) == BOXLITE_ERR_INVALID_ARGUMENT, "signal 0");
  boxlite_execution_free(ex);
}

/* read_until reads stdout until it contains want (or EOF, or 30 s without
 * it); returns whether it did. */
static int read_until(boxlite_execution_t *ex, char *buf, size_t cap, size_t *len, const char *want) {
  for (int i = 0; i < 300 && !strstr(buf, want); i++) {
    size_t n = 0;
    int rc = boxlite_execution_read(ex, BOXLITE_STDOUT, (uint8_t *)buf + *len, cap - 1 - *len, 100, &n, NULL);
    if (rc == BOXLITE_EOF) break;
    *len += n;
    buf[*len] = 0;
  }
  return strstr(buf, want) != NULL;
}

/* A process on a terminal: its initial size, a resize, typed input that the
 * terminal echoes, stderr merged, ^D as close_stdin. */
static void test_tty(boxlite_box_t *box) {
  boxlite_error_t *err = NULL;
  boxlite_execution_t *ex = NULL;
  int rc = boxlite_box_exec(box,
                            "{\"argv\":[\"sh\",\"-c\",\"stty size; read x; stty size; echo got:$x >&2; cat; echo eof\"],"
                            "\"tty\":true,\"rows\":30,\"cols\":90,\"stdin\":true}",
                            &ex, &err);
  expect(rc, &err, BOXLITE_OK, "exec on a terminal");
  if (rc != BOXLITE_OK) return;
  char out[4096] = {0};
  size_t len = 0;
  CHECK(read_until(ex, out, sizeof out, &len, "30 90\r\n"), "initial size: %s", out);
  expect(boxlite_execution_resize(ex, 50, 120, &err), &err, BOXLITE_OK, "resize");
  expect(boxlite_execution_resize(ex, 0, 120, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "resize to 0 rows");
  expect(boxlite_execution_resize(ex, 50, 65536, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "resize to 65536 cols");
  expect(boxlite_execution_write(ex, (const uint8_t *)"hi\n", 3, &err), &err, BOXLITE_OK, "type a line");
  CHECK(read_until(ex, out, sizeof out, &len, "hi\r\n50 120\r\ngot:hi\r\n"), "echo, new size, stderr: %s", out);
  expect(boxlite_execution_close_stdin(ex, &err), &err, BOXLITE_OK, "close stdin (^D)");
  CHECK(read_until(ex, out, sizeof out, &len, "eof\r\n"), "cat saw ^D: %s", out);
  size_t n = 0;
  uint8_t b[8];
  CHECK(boxlite_execution_read(ex, BOXLITE_STDERR, b, sizeof b, 10000, &n, NULL) == BOXLITE_EOF, "stderr only ends");
  boxlite_exit_t st;
  expect(boxlite_execution_wait(ex, 30000, &st, &err), &err, BOXLITE_OK, "wait tty");
  CHECK(st.exit_code == 0 && st.signal == 0, "tty exit %d/%d", st.exit_code, st.signal);
  expect(boxlite_execution_resize(ex, 24, 80, &err), &err, BOXLITE_ERR_INVALID_STATE, "resize after exit");
  boxlite_execution_free(ex);

  /* Sizes and tty flags are checked. */
  expect(boxlite_box_exec(box, "{\"argv\":[\"true\"],\"tty\":true,\"rows\":70000}", &ex, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "70000 rows");
  expect(boxlite_box_exec(box, "{\"argv\":[\"true\"],\"rows\":30}", &ex, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "rows without tty");
  expect(boxlite_box_exec(box, "{\"argv\":[\"true\"],\"tty\":\"yes\"}", &ex, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "tty not a bool");
  /* run collects a terminal's output. */
  boxlite_result_t *res = NULL;
  rc = boxlite_box_run(box, "{\"argv\":[\"sh\",\"-c\",\"echo $TERM; test -t 1\"],\"tty\":true}", &res, &err);
  expect(rc, &err, BOXLITE_OK, "run on a terminal");
  if (rc == BOXLITE_OK) {
    CHECK(res->exit.exit_code == 0 && res->stdout_len == 7 && memcmp(res->stdout_data, "xterm\r\n", 7) == 0 && res->stderr_len == 0,
          "run on a terminal: %d %.*s", res->exit.exit_code, (int)res->stdout_len, res->stdout_data);
    boxlite_result_free(res);
  }
}

struct reader {
  boxlite_execution_t *ex;
  int stream, rc;
  size_t n;
  uint8_t buf[16];
};

static void *blocking_read(void *arg) {
  struct reader *r = arg;
  r->rc = boxlite_execution_read(r->ex, r->stream, r->buf, sizeof r->buf, 20000, &r->n, NULL);
  return NULL;
}

/* Two threads block on the two streams of one execution; output on one must
 * wake its own reader even while the other stream stays silent. */
static void test_two_blocking_readers(boxlite_box_t *box) {
  boxlite_error_t *err = NULL;
  boxlite_execution_t *ex = NULL;
  int rc = boxlite_box_exec(box, "{\"argv\":[\"sh\",\"-c\",\"sleep 0.3; echo e >&2; sleep 30\"]}", &ex, &err);
  expect(rc, &err, BOXLITE_OK, "exec for two readers");
  if (rc != BOXLITE_OK) return;
  struct reader out = {.ex = ex, .stream = BOXLITE_STDOUT}, errr = {.ex = ex, .stream = BOXLITE_STDERR};
  pthread_t a, b;
  pthread_create(&a, NULL, blocking_read, &out);
  pthread_create(&b, NULL, blocking_read, &errr);
  pthread_join(b, NULL); /* returns when "e" arrives, or after 20 s if its wakeup was lost */
  CHECK(errr.rc == BOXLITE_OK && errr.n == 2 && memcmp(errr.buf, "e\n", 2) == 0, "stderr reader: %s", boxlite_status_name(errr.rc));
  boxlite_execution_kill(ex, NULL);
  pthread_join(a, NULL);
  CHECK(out.rc == BOXLITE_EOF, "stdout reader after kill: %s", boxlite_status_name(out.rc));
  boxlite_exit_t st;
  CHECK(boxlite_execution_wait(ex, 0, &st, NULL) == BOXLITE_OK && st.signal == SIGKILL, "wait(0) right after EOF");
  boxlite_execution_free(ex);
}

/* An event loop that pauses stdout (stops reading it while data is left)
 * and keeps reading stderr must see the fd go quiet, not spin. */
static void test_paused_stream(boxlite_box_t *box) {
  boxlite_error_t *err = NULL;
  boxlite_execution_t *ex = NULL;
  int rc = boxlite_box_exec(box, "{\"argv\":[\"sh\",\"-c\",\"head -c 2000000 /dev/zero; sleep 30\"]}", &ex, &err);
  expect(rc, &err, BOXLITE_OK, "exec for pause");
  if (rc != BOXLITE_OK) return;
  uint8_t buf[4096];
  size_t n = 0;
  CHECK(boxlite_execution_read(ex, BOXLITE_STDOUT, buf, sizeof buf, 10000, &n, NULL) == BOXLITE_OK, "first stdout bytes");
  /* While stdout's window fills, each arrival wakes the loop once; then quiet
   * (allow up to 2000 wakeups, far more than a 256 KiB window takes). */
  int quiet = 0;
  for (int i = 0; i < 2000 && !quiet; i++) {
    CHECK(boxlite_execution_read(ex, BOXLITE_STDERR, buf, sizeof buf, 0, &n, NULL) == BOXLITE_AGAIN, "stderr is empty");
    struct pollfd p = {.fd = boxlite_execution_fd(ex), .events = POLLIN};
    quiet = poll(&p, 1, 300) == 0; /* stdout arrivals stop once its window is full */
  }
  CHECK(quiet, "fd stays readable for a paused stream");
  boxlite_execution_free(ex); /* kills it */
}

/* Snapshots, clone, export and import of the (running, then stopped) box;
 * nothing more boots. Leaves the box stopped. */
static void test_snapshots(boxlite_runtime_t *rt, boxlite_box_t *box, const char *home) {
  boxlite_error_t *err = NULL;
  char *json = NULL;
  boxlite_box_t *c = NULL;
  /* A running box is saved at one instant, with its memory if asked. */
  expect(boxlite_box_snapshot_create_with(box, "live", "{\"memory\": true}", &json, &err), &err, BOXLITE_OK, "memory snapshot of a running box");
  CHECK(json && strstr(json, "\"memory\":true"), "memory snapshot %s", json ? json : "");
  boxlite_string_free(json);
  json = NULL;
  expect(boxlite_box_snapshot_create_with(box, "bad", "{\"memry\": true}", &json, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "unknown snapshot option");
  expect(boxlite_box_snapshot_remove(box, "live", &err), &err, BOXLITE_OK, "remove the running box's snapshot");
  expect(boxlite_box_stop(box, &err), &err, BOXLITE_OK, "stop");
  expect(boxlite_box_snapshot_create(box, "c1", &json, &err), &err, BOXLITE_OK, "snapshot_create");
  CHECK(json && strstr(json, "\"name\":\"c1\"") && strstr(json, "\"size_bytes\""), "snapshot %s", json ? json : "");
  boxlite_string_free(json);
  json = NULL;
  expect(boxlite_box_snapshot_create(box, "c1", &json, &err), &err, BOXLITE_ERR_ALREADY_EXISTS, "same name");
  expect(boxlite_box_snapshot_create(box, "../c1", &json, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "bad name");
  expect(boxlite_box_snapshot_list(box, &json, &err), &err, BOXLITE_OK, "snapshot_list");
  CHECK(json && json[0] == '[' && strstr(json, "\"c1\""), "list %s", json ? json : "");
  boxlite_string_free(json);
  json = NULL;
  expect(boxlite_box_snapshot_get(box, "nope", &json, &err), &err, BOXLITE_ERR_NOT_FOUND, "get missing");
  expect(boxlite_box_snapshot_get(box, NULL, &json, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "get NULL");
  expect(boxlite_box_snapshot_restore(box, "c1", &err), &err, BOXLITE_OK, "snapshot_restore");
  expect(boxlite_box_clone(box, "{\"nmae\":\"x\"}", &c, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "clone: unknown option");
  expect(boxlite_box_clone(box, "{\"name\":\"c-clone\",\"snapshot\":\"c1\"}", &c, &err), &err, BOXLITE_OK, "clone");
  if (c) {
    CHECK(strlen(boxlite_box_id(c)) == 12 && strcmp(boxlite_box_id(c), boxlite_box_id(box)) != 0, "clone id");
    expect(boxlite_box_remove(c, 0, &err), &err, BOXLITE_OK, "remove clone");
    boxlite_box_free(c);
    c = NULL;
  }
  char *path = NULL;
  expect(boxlite_box_export(box, home, &path, &err), &err, BOXLITE_OK, "export");
  CHECK(path && strstr(path, ".boxlite"), "export path %s", path ? path : "");
  if (path) {
    expect(boxlite_runtime_import_box(rt, path, "c-bad", "{\"image\":\"alpine:latest\"}", &c, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "import options naming the image");
    expect(boxlite_runtime_import_box(rt, path, "c-bad", "{\"memory_mib\":1}", &c, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "import options out of range");
    expect(boxlite_runtime_import_box(rt, path, "c-imported", "{\"memory_mib\":256,\"auto_remove\":false}", &c, &err), &err, BOXLITE_OK, "import_box");
    if (c) {
      json = NULL;
      expect(boxlite_box_info(c, &json, &err), &err, BOXLITE_OK, "info of the imported box");
      CHECK(json && strstr(json, "\"memory_mib\":256") && strstr(json, "\"auto_remove\":false"), "import options apply: %s", json ? json : "");
      boxlite_string_free(json);
      expect(boxlite_box_remove(c, 0, &err), &err, BOXLITE_OK, "remove imported");
      boxlite_box_free(c);
      c = NULL;
    }
    boxlite_string_free(path);
  }
  expect(boxlite_runtime_import_box(rt, "/nonexistent.boxlite", NULL, NULL, &c, &err), &err, BOXLITE_ERR_NOT_FOUND, "import of a missing file");
  expect(boxlite_runtime_import_box(rt, "/etc/passwd", NULL, NULL, &c, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "import of a non-archive");
  expect(boxlite_box_snapshot_remove(box, "c1", &err), &err, BOXLITE_OK, "snapshot_remove");
  expect(boxlite_box_snapshot_remove(box, "c1", &err), &err, BOXLITE_ERR_NOT_FOUND, "snapshot_remove again");
}

int main(void) {
  const char *image = getenv("BOXLITE_TEST_IMAGE");
  if (!image || !getenv("BOXLITE_ASSETS")) {
    fprintf(stderr, "needs BOXLITE_TEST_IMAGE and BOXLITE_ASSETS (run make test)\n");
    return 1;
  }
  CHECK(strcmp(boxlite_version(), BOXLITE_VERSION_STRING) == 0, "version %s", boxlite_version());
  CHECK(strcmp(boxlite_status_name(BOXLITE_ERR_NOT_FOUND), "not_found") == 0, "status name");
  CHECK(strcmp(boxlite_status_name(12345), "unknown") == 0, "unknown status name");

  char home[] = "/tmp/bxc.XXXXXX";
  char *json = NULL;
  boxlite_runtime_t *rt = runtime_in(home, image, &json);
  if (!rt) return 1;
  CHECK(json && strstr(json, "alpine"), "loaded %s", json ? json : "");
  boxlite_string_free(json);
  json = NULL;
  boxlite_error_t *err = NULL;
  int rc;

  boxlite_box_t *box = NULL;
  rc = boxlite_box_create(rt, "{\"image\":\"alpine:latest\",\"name\":\"c-test\",\"memory_mib\":256,\"auto_remove\":false}", &box, &err);
  expect(rc, &err, BOXLITE_OK, "box_create");
  if (rc == BOXLITE_OK) {
    CHECK(strlen(boxlite_box_id(box)) == 12, "box id");
    json = NULL;
    expect(boxlite_box_info(box, &json, &err), &err, BOXLITE_OK, "info of the created box");
    CHECK(json && strstr(json, "\"state\":\"configured\"") && !strstr(json, "\"runtime\""), "created box is configured: %s", json ? json : "");
    boxlite_string_free(json);
    expect(boxlite_box_start(box, &err), &err, BOXLITE_OK, "start");
    expect(boxlite_box_start(box, &err), &err, BOXLITE_OK, "start of a running box");
    json = NULL;
    expect(boxlite_box_info(box, &json, &err), &err, BOXLITE_OK, "info");
    CHECK(json && strstr(json, "\"state\":\"running\"") && strstr(json, "\"accel\"") && strstr(json, "\"guest_ip\"") &&
              strstr(json, "\"health_status\":{\"state\":\"none\",\"failures\":0}"), "info %s", json ? json : "");
    boxlite_string_free(json);
    test_run(box);
    test_metrics(rt, box);
    test_copy(box);
    test_stream(box);
    test_two_blocking_readers(box);
    test_paused_stream(box);
    test_tty(box);
    test_pause_fork(rt, box);
    test_bad_input(rt, box);
    expect(boxlite_box_remove(box, 0, &err), &err, BOXLITE_ERR_INVALID_STATE, "remove running box without force");
    test_snapshots(rt, box, home);
    expect(boxlite_box_remove(box, 1, &err), &err, BOXLITE_OK, "remove with force");
    expect(boxlite_box_metrics(box, &json, &err), &err, BOXLITE_ERR_INVALID_STATE, "metrics of a removed box");
    boxlite_box_free(box);
    expect(boxlite_box_start(box, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "freed box");
  }
  boxlite_runtime_free(rt);
  expect(boxlite_box_list(rt, &json, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "freed runtime");
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", home);
  system(cmd);
  printf("%d passed, %d failed\n", checks - failures, failures);
  return failures != 0;
}
