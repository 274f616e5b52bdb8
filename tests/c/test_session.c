/* C ABI tests of sessions against a real box: a Python session keeping
 * state across cells (results as JSON, a timeout that keeps the state, a
 * cell that ignores the interrupt and restarts the session, streaming with
 * poll(2)), a shell session keeping cwd and variables, and bad input.
 * Needs BOXLITE_ASSETS and BOXLITE_TEST_PYTHON_IMAGE (python:slim; without
 * it the Python part is skipped and the shell part runs on
 * BOXLITE_TEST_IMAGE). */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "boxlite.h"
#include "check.h"


/* run runs a cell that must succeed; returns its result JSON (caller frees). */
static char *run(boxlite_session_t *s, const char *code) {
  char *json = NULL;
  boxlite_error_t *err = NULL;
  expect(boxlite_session_run(s, code, "{\"timeout_secs\": 60}", &json, &err), &err, BOXLITE_OK, code);
  return json ? json : calloc(1, 1);
}

static void check_run(boxlite_session_t *s, const char *code, const char *want) {
  char *json = run(s, code);
  CHECK(strstr(json, want) != NULL, "%s: %s lacks %s", code, json, want);
  boxlite_string_free(json);
}

static void test_python(boxlite_box_t *box) {
  boxlite_session_t *s = NULL;
  boxlite_error_t *err = NULL;
  char *json = NULL;
  int rc = boxlite_session_new(box, "python", "{\"grace_secs\": 1.5}", &s, &err);
  expect(rc, &err, BOXLITE_OK, "session_new python");
  if (rc != BOXLITE_OK) return;

  /* The example: definitions and imports survive between cells. */
  check_run(s, "import json\ndef process(data):\n    return {k: v * 2 for k, v in data.items()}\n", "\"error\":null");
  check_run(s, "output = process({\"a\": 1, \"b\": 2, \"c\": 3})\nprint(json.dumps(output))",
            "\"stdout\":\"{\\\"a\\\": 2, \\\"b\\\": 4, \\\"c\\\": 6}\\n\"");
  check_run(s, "n = 20\nn * 2 + 2", "\"value\":\"42\"");
  json = run(s, "def f():\n    raise ValueError('bad')\nf()");
  CHECK(strstr(json, "\"type\":\"ValueError\"") && strstr(json, "\"message\":\"bad\"") &&
            strstr(json, "Traceback (most recent call last)") && strstr(json, "\"exit_code\":1"),
        "exception: %s", json);
  boxlite_string_free(json);

  /* A timeout interrupts the cell; the state stays. */
  check_run(s, "x = 1", "\"exit_code\":0");
  json = NULL;
  expect(boxlite_session_run(s, "print('spinning', flush=True)\nwhile True: pass", "{\"timeout_secs\": 1}", &json, &err), &err, BOXLITE_ERR_TIMEOUT, "timeout");
  CHECK(json && strstr(json, "\"timed_out\":true") && strstr(json, "\"restarted\":false") && strstr(json, "spinning"),
        "timeout result: %s", json ? json : "NULL");
  boxlite_string_free(json);
  check_run(s, "print(x)", "\"stdout\":\"1\\n\"");

  /* A cell that ignores the interrupt: killed, session restarted. */
  json = NULL;
  rc = boxlite_session_run(s, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass", "{\"timeout_secs\": 1}", &json, &err);
  CHECK(rc == BOXLITE_ERR_TIMEOUT && err && strstr(err->message, "restarted"), "ignored interrupt: %s %s",
        boxlite_status_name(rc), err ? err->message : "");
  boxlite_error_free(err);
  err = NULL;
  CHECK(json && strstr(json, "\"restarted\":true"), "restart result: %s", json ? json : "NULL");
  boxlite_string_free(json);
  check_run(s, "'x' in globals()", "\"value\":\"False\"");
  json = NULL;
  expect(boxlite_session_info(s, &json, &err), &err, BOXLITE_OK, "session_info");
  CHECK(json && strstr(json, "\"kind\":\"python\"") && strstr(json, "\"restarts\":1"), "info: %s", json ? json : "");
  boxlite_string_free(json);

  /* Streaming: output arrives while the cell runs, in order, through poll. */
  boxlite_cell_t *c = NULL;
  rc = boxlite_session_run_start(s, "import sys, time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.3)\nprint('e', file=sys.stderr)\n'end'", "{\"timeout_secs\": 60}", &c, &err);
  expect(rc, &err, BOXLITE_OK, "run_start");
  if (rc == BOXLITE_OK) {
    json = NULL;
    expect(boxlite_cell_result(c, 0, &json, &err), &err, BOXLITE_AGAIN, "result while running");
    char out[256] = "", errs[64] = "";
    int early = 0;
    for (;;) {
      struct pollfd pfd = {.fd = boxlite_cell_fd(c), .events = POLLIN};
      CHECK(poll(&pfd, 1, 30000) == 1, "poll");
      uint8_t buf[64];
      size_t n = 0;
      int stream = 0;
      rc = boxlite_cell_read(c, buf, sizeof buf, 0, &stream, &n, &err);
      if (rc == BOXLITE_EOF) break;
      if (rc == BOXLITE_AGAIN) continue;
      expect(rc, &err, BOXLITE_OK, "cell_read");
      if (rc != BOXLITE_OK) break;
      if (!strlen(out)) early = boxlite_cell_result(c, 0, &json, NULL) == BOXLITE_AGAIN;
      strncat(stream == BOXLITE_STDOUT ? out : errs, (char *)buf, n);
    }
    CHECK(strcmp(out, "0\n1\n2\n") == 0 && strcmp(errs, "e\n") == 0 && early, "streamed %s / %s (early %d)", out, errs, early);
    json = NULL;
    expect(boxlite_cell_result(c, -1, &json, &err), &err, BOXLITE_OK, "cell_result");
    CHECK(json && strstr(json, "\"value\":\"'end'\"") && strstr(json, "\"stdout\":\"\""), "cell result %s", json ? json : "");
    boxlite_string_free(json);
    boxlite_cell_free(c);
    json = NULL;
    expect(boxlite_cell_result(c, 0, &json, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "freed cell");
  }

  /* A second, independent session; reset. */
  boxlite_session_t *s2 = NULL;
  expect(boxlite_session_new(box, "python", NULL, &s2, &err), &err, BOXLITE_OK, "second session");
  check_run(s, "y = 'first'", "\"error\":null");
  check_run(s2, "'y' in globals()", "\"value\":\"False\"");
  expect(boxlite_session_reset(s, &err), &err, BOXLITE_OK, "reset");
  check_run(s, "'y' in globals()", "\"value\":\"False\"");

  /* Wrong use. */
  boxlite_result_t *res = NULL;
  expect(boxlite_session_exec(s, "{\"argv\":[\"true\"]}", &res, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "exec on a python session");
  expect(boxlite_session_run(s, "1", "{\"timeout_secs\": -5}", &json, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "negative timeout");
  expect(boxlite_session_run(s, NULL, NULL, &json, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "NULL code");
  boxlite_session_t *bad = NULL;
  expect(boxlite_session_new(box, "python", "{\"python\":\"/nope/python3\"}", &bad, &err), &err, BOXLITE_ERR_NOT_FOUND, "missing interpreter");
  expect(boxlite_session_new(box, "python", "{\"shell\":\"/bin/sh\"}", &bad, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "shell option on python");
  boxlite_session_free(s2);
  boxlite_session_free(s);
  json = NULL;
  expect(boxlite_session_run(s, "1", NULL, &json, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "freed session");
  CHECK(json == NULL, "no result on error");
}

static void test_shell(boxlite_box_t *box) {
  boxlite_session_t *s = NULL;
  boxlite_error_t *err = NULL;
  boxlite_result_t *res = NULL;
  int rc = boxlite_session_new(box, "shell", NULL, &s, &err);
  expect(rc, &err, BOXLITE_OK, "session_new shell");
  if (rc != BOXLITE_OK) return;
  expect(boxlite_session_exec(s, "{\"argv\":[\"cd\",\"/tmp\"]}", &res, &err), &err, BOXLITE_OK, "cd");
  boxlite_result_free(res);
  expect(boxlite_session_exec(s, "{\"argv\":[\"export\",\"A=1\"]}", &res, &err), &err, BOXLITE_OK, "export");
  boxlite_result_free(res);
  res = NULL;
  expect(boxlite_session_exec(s, "{\"argv\":[\"sh\",\"-c\",\"pwd; echo $A\"]}", &res, &err), &err, BOXLITE_OK, "pwd");
  CHECK(res && res->exit.exit_code == 0 && strcmp((char *)res->stdout_data, "/tmp\n1\n") == 0, "pwd; echo $A: %s", res ? (char *)res->stdout_data : "");
  boxlite_result_free(res);
  res = NULL;
  expect(boxlite_session_exec(s, "{\"argv\":[\"sh\",\"-c\",\"echo e >&2; exit 3\"]}", &res, &err), &err, BOXLITE_OK, "exit 3");
  CHECK(res && res->exit.exit_code == 3 && strcmp((char *)res->stderr_data, "e\n") == 0, "exit code and stderr");
  boxlite_result_free(res);
  res = NULL;
  expect(boxlite_session_exec(s, "{\"argv\":[\"sleep\",\"30\"],\"timeout_secs\":1}", &res, &err), &err, BOXLITE_ERR_TIMEOUT, "timeout");
  CHECK(res && res->exit.timed_out == 1, "timed_out set");
  boxlite_result_free(res);
  res = NULL;
  expect(boxlite_session_exec(s, "{\"argv\":[\"pwd\"]}", &res, &err), &err, BOXLITE_OK, "pwd after timeout");
  CHECK(res && strcmp((char *)res->stdout_data, "/tmp\n") == 0, "cwd kept: %s", res ? (char *)res->stdout_data : "");
  boxlite_result_free(res);
  char *json = NULL;
  expect(boxlite_session_run(s, "1", NULL, &json, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "run on a shell session");
  expect(boxlite_session_exec(s, "{\"argv\":[\"true\"],\"cwd\":\"/\"}", &res, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "unknown field");
  expect(boxlite_session_exec(s, "{\"argv\":[]}", &res, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "empty argv");
  boxlite_session_free(s);
  boxlite_session_free(NULL);
  boxlite_cell_free(NULL);
  CHECK(boxlite_cell_fd(NULL) == -1, "fd of NULL");
  expect(boxlite_session_new(box, "ruby", NULL, &s, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "unknown kind");
  expect(boxlite_session_new(NULL, "shell", NULL, &s, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "NULL box");
  expect(boxlite_session_new(box, "shell", "{\"grace\":1}", &s, &err), &err, BOXLITE_ERR_INVALID_ARGUMENT, "unknown option");
}

int main(void) {
  const char *python = getenv("BOXLITE_TEST_PYTHON_IMAGE");
  /* A missing input fails the test (never a run that tested less). */
  if (!getenv("BOXLITE_ASSETS") || !python || access(python, R_OK) != 0) {
    fprintf(stderr, "needs BOXLITE_ASSETS and a readable BOXLITE_TEST_PYTHON_IMAGE (run make test)\n");
    return 1;
  }
  char home[] = "/tmp/bxs.XXXXXX";
  boxlite_runtime_t *rt = runtime_in(home, python, NULL);
  if (!rt) return 1;
  boxlite_error_t *err = NULL;
  int rc;

  boxlite_box_t *box = NULL;
  rc = boxlite_box_create(rt, "{\"image\":\"python:slim\"}", &box, &err);
  expect(rc, &err, BOXLITE_OK, "box_create");
  if (rc == BOXLITE_OK) {
    test_python(box);
    test_shell(box);
    expect(boxlite_box_remove(box, 1, &err), &err, BOXLITE_OK, "remove");
    boxlite_box_free(box);
  }
  boxlite_runtime_free(rt);
  char rm[300];
  snprintf(rm, sizeof rm, "rm -rf %s", home);
  if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", home);
  printf("%d checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}
