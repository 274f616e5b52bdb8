// Package rest tests `boxlite serve`: the real binary, on loopback, over a
// home of its own, driven by real clients (BoxLite's own Python package
// from PyPI, in a virtualenv the tests make) and by raw HTTP.
package rest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

var (
	repo  string
	home  string // the server's BOXLITE_HOME
	keys  string // its key file
	key   string // a key in it
	srv   *server
	httpc = &http.Client{Timeout: 2 * time.Minute}
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Getenv("BOXLITE_TEST_IMAGE") == "" || os.Getenv("BOXLITE_ASSETS") == "" {
		fmt.Println("FAIL: the REST tests need BOXLITE_TEST_IMAGE and BOXLITE_ASSETS; run them with `make test-go`")
		return 1
	}
	wd, _ := os.Getwd()
	repo = filepath.Join(wd, "..", "..")
	var err error
	if home, err = os.MkdirTemp("", "bxrest"); err != nil {
		fmt.Println(err)
		return 1
	}
	defer os.RemoveAll(home)
	keys = filepath.Join(home, "serve", "keys")
	if _, err := boxliteCmd(nil, "image", "load", os.Getenv("BOXLITE_TEST_IMAGE")); err != nil {
		fmt.Println("load the test image:", err)
		return 1
	}
	out, err := boxliteCmd(nil, "serve", "key", "create", "--keys", keys, "--name", "tests")
	if err != nil {
		fmt.Println("create a key:", err)
		return 1
	}
	key = strings.TrimSpace(out)
	if srv, err = startServer(); err != nil {
		fmt.Println("start the server:", err)
		return 1
	}
	code := m.Run()
	// The boxes the tests left are removed, so that nothing keeps running.
	if err := removeAll(); err != nil {
		fmt.Println("remove the boxes:", err)
		code = 1
	}
	if err := srv.stop(); err != nil {
		fmt.Println("stop the server:", err)
		code = 1
	}
	return code
}

func removeAll() error {
	get := func(method, path string) (*http.Response, error) {
		req, _ := http.NewRequest(method, srv.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		return httpc.Do(req)
	}
	resp, err := get("GET", "/v1/boxes")
	if err != nil {
		return err
	}
	var list struct {
		Boxes []struct {
			BoxID string `json:"box_id"`
		} `json:"boxes"`
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil {
		return err
	}
	for _, b := range list.Boxes {
		resp, err := get("DELETE", "/v1/boxes/"+b.BoxID+"?force=true")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			return fmt.Errorf("remove %s: %s", b.BoxID, resp.Status)
		}
	}
	return nil
}

// boxliteCmd runs the CLI on the tests' home, within two minutes.
func boxliteCmd(extraEnv []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(repo, "build", "boxlite"), args...)
	cmd.Env = append(append(os.Environ(), "BOXLITE_HOME="+home), extraEnv...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("boxlite %q: %v: %s", args, err, errOut.String())
	}
	return out.String(), nil
}

// server is a running `boxlite serve`.
type server struct {
	cmd  *exec.Cmd
	url  string
	done chan error
	log  *bytes.Buffer
}

var listening = regexp.MustCompile(`listening on (https?://[0-9.:]+)`)

// startServer starts `boxlite serve` on a free loopback port and waits
// until it says where it listens.
func startServer(args ...string) (*server, error) { return startServerEnv(nil, args...) }

// startServerEnv is startServer with more environment.
func startServerEnv(env []string, args ...string) (*server, error) {
	cmd := exec.Command(filepath.Join(repo, "build", "boxlite"), append([]string{"serve", "--listen", "127.0.0.1:0", "--keys", keys}, args...)...)
	cmd.Env = append(append(os.Environ(), "BOXLITE_HOME="+home), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, done: make(chan error, 1), log: &bytes.Buffer{}}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if m := listening.FindStringSubmatch(line); m != nil {
				urlc <- m[1]
			}
			s.log.WriteString(line + "\n")
		}
		s.done <- cmd.Wait()
	}()
	select {
	case s.url = <-urlc:
		return s, nil
	case err := <-s.done:
		return nil, fmt.Errorf("boxlite serve ended: %v: %s", err, s.log.String())
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		return nil, fmt.Errorf("boxlite serve did not listen within a minute")
	}
}

// stop ends the server with SIGTERM (a graceful shutdown), or SIGKILL
// after 40 s.
func (s *server) stop() error {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		return err
	case <-time.After(40 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("boxlite serve did not end within 40s of SIGTERM")
	}
}

// call makes one request with the tests' key (token "" sends none) and
// returns the status and the body.
func call(t *testing.T, method, path, token string, body io.Reader, ctype string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, srv.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := httpc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return resp.StatusCode, data
}

// callJSON is call with a JSON body (nil: none) and the tests' key.
func callJSON(t *testing.T, method, path string, v any) (int, []byte) {
	t.Helper()
	var body io.Reader
	ctype := ""
	if v != nil {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		body, ctype = bytes.NewReader(data), "application/json"
	}
	return call(t, method, path, key, body, ctype)
}

// errorCode is the code of an error body, failing the test on another body.
func errorCode(t *testing.T, body []byte) string {
	t.Helper()
	var e struct {
		Error struct {
			Message, Type, Code string
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("not an error body (message, type, code): %s", body)
	}
	return e.Error.Code
}
