package containerd

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// freePort is a TCP port free on the host now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestCRIHostPorts publishes a hostNetwork pod's port declared in its
// io.boxlite.host-ports annotation: a server in the pod's box answers on
// the node's 127.0.0.1:PORT; after stopp and rmp the port is free again. A
// port in use fails the sandbox naming it; a bad entry fails it naming
// the annotation.
func TestCRIHostPorts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pauseImage(t, ctx)
	dir := t.TempDir()
	port := freePort(t)
	podConfig := func(name, ports string) string {
		return writeJSON(t, filepath.Join(dir, name+".json"), map[string]any{
			"metadata":      map[string]any{"name": name, "namespace": "default", "uid": "uid-" + name, "attempt": 0},
			"hostname":      name,
			"log_directory": filepath.Join(dir, "logs-"+name),
			"annotations":   map[string]string{"io.boxlite.host-ports": ports},
			"linux":         map[string]any{"security_context": map[string]any{"namespace_options": map[string]any{"network": 2}}},
		})
	}

	// Refused before a box: a bad entry, and a port the host holds.
	if _, err := crictl(ctx, "runp", "--runtime", "boxlite", podConfig("bad", "8080,80x")); err == nil ||
		!strings.Contains(err.Error(), "io.boxlite.host-ports") || !strings.Contains(err.Error(), "80x") {
		t.Fatalf("runp with a bad entry: %v; want an error naming the annotation and the entry", err)
	}
	held, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	heldPort := held.Addr().(*net.TCPAddr).Port
	_, err = crictl(ctx, "runp", "--runtime", "boxlite", podConfig("busy", fmt.Sprintf("127.0.0.1:%d:80", heldPort)))
	held.Close()
	if err == nil || !strings.Contains(err.Error(), fmt.Sprint(heldPort)) {
		t.Fatalf("runp with host port %d in use: %v; want an error naming the port", heldPort, err)
	}
	if _, msg, ok := strings.Cut(err.Error(), "desc = "); ok {
		t.Logf("runp with host port %d in use: %s", heldPort, strings.SplitN(msg, "\n", 2)[0])
	}
	for _, name := range []string{"bad", "busy"} { // crictl leaves a failed sandbox's record
		if r, err := crictl(ctx, "pods", "-q", "--name", name); err == nil && strings.TrimSpace(r.stdout) != "" {
			crictl(ctx, "rmp", "-f", strings.TrimSpace(r.stdout)) //nolint:errcheck
		}
	}
	awaitNothingLeft(t, 60*time.Second)

	podCfg := podConfig("web", fmt.Sprint(port))
	start := time.Now()
	r, err := crictl(ctx, "runp", "--runtime", "boxlite", podCfg)
	if err != nil {
		t.Fatal(err)
	}
	pod := strings.TrimSpace(r.stdout)
	t.Logf("runp (host port %d): %.1f s", port, time.Since(start).Seconds())
	defer crictl(context.Background(), "rmp", "-f", pod) //nolint:errcheck
	cfg := writeJSON(t, filepath.Join(dir, "c.json"), map[string]any{
		"metadata": map[string]any{"name": "httpd"},
		"image":    map[string]any{"image": "docker.io/library/alpine:latest"},
		"command":  []string{"sh", "-c", fmt.Sprintf("mkdir -p /www && echo answer-from-the-pod > /www/index.html && exec httpd -f -p %d -h /www", port)},
		"log_path": "httpd.log",
	})
	r, err = crictl(ctx, "create", pod, cfg, podCfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := crictl(ctx, "start", strings.TrimSpace(r.stdout)); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	hc := &http.Client{Timeout: 5 * time.Second}
	var body string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		resp, err := hc.Get(url)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if body = string(b); strings.Contains(body, "answer-from-the-pod") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %q %v; want the pod's server's answer within 60 s", url, body, err)
		}
	}
	t.Logf("GET %s from the host: %q", url, strings.TrimSpace(body))

	if _, err := crictl(ctx, "stopp", pod); err != nil {
		t.Fatal(err)
	}
	if ln, err := net.Listen("tcp4", fmt.Sprintf("0.0.0.0:%d", port)); err != nil {
		t.Errorf("after stopp, port %d is still held: %v", port, err)
	} else {
		ln.Close()
	}
	if _, err := crictl(ctx, "rmp", pod); err != nil {
		t.Fatal(err)
	}
	awaitNothingLeft(t, 60*time.Second)
	ln, err := net.Listen("tcp4", fmt.Sprintf("0.0.0.0:%d", port))
	if err != nil {
		t.Fatalf("after rmp, port %d is still held: %v", port, err)
	}
	ln.Close()
}
