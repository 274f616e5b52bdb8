package main

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
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/boxlite/boxlite"
)

// restBench measures `boxlite serve` (a process of its own, as deployed):
// the exec round trip over REST against the Go API in the same run, 100
// clients each doing create → exec → remove at once, and 1,000 streaming
// execs at once over 20 boxes, with the server's peak RSS.
func restBench() error {
	home, err := os.MkdirTemp("", "bxrb")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	bin := filepath.Join(os.Getenv("BOXLITE_ASSETS"), "boxlite")
	cli := func(args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "BOXLITE_HOME="+home)
		out, err := cmd.Output()
		return string(out), err
	}
	if _, err := cli("image", "load", os.Getenv("BOXLITE_TEST_IMAGE")); err != nil {
		return fmt.Errorf("image load: %w", err)
	}
	keys := filepath.Join(home, "keys")
	out, err := cli("serve", "key", "create", "--keys", keys)
	if err != nil {
		return err
	}
	c := &restClient{key: strings.TrimSpace(out), http: &http.Client{Timeout: 10 * time.Minute}}
	srv := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--keys", keys, "--access-log", "",
		"--max-boxes-per-key", "500", "--max-memory-mib-per-key", "1000000", "--max-execs-per-key", "5000")
	srv.Env = append(os.Environ(), "BOXLITE_HOME="+home)
	stderr, _ := srv.StderrPipe()
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	sc := bufio.NewScanner(stderr)
	re := regexp.MustCompile(`listening on (http://[0-9.:]+)`)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			c.url = m[1]
			break
		}
	}
	go io.Copy(io.Discard, stderr)
	if c.url == "" {
		return fmt.Errorf("boxlite serve did not start")
	}
	peak := &rssPeak{pid: srv.Process.Pid}
	stopPeak := peak.watch()
	defer stopPeak()

	// 1. exec round trip of `true`: REST vs the Go API on the same box.
	ctx := context.Background()
	id, err := c.create(ctx, "rt-box")
	if err != nil {
		return err
	}
	if _, err := c.exec(ctx, id, "true"); err != nil { // boots it
		return err
	}
	rt, err := boxlite.NewRuntime(boxlite.WithHome(home))
	if err != nil {
		return err
	}
	defer rt.Close()
	box, err := rt.Get(ctx, id)
	if err != nil {
		return err
	}
	var local, remote []time.Duration
	for i := 0; i < 40; i++ {
		t0 := time.Now()
		if _, err := box.Run(ctx, boxlite.Command{Argv: []string{"true"}}); err != nil {
			return err
		}
		local = append(local, time.Since(t0))
		t0 = time.Now()
		if _, err := c.exec(ctx, id, "true"); err != nil {
			return err
		}
		remote = append(remote, time.Since(t0))
	}
	rec.vs("exec `true` over REST, p50", msf(median(remote)), "ms", "Go API exec of `true` on the same box, p50", msf(median(local)), nil)
	rec.vs("exec `true` over REST, p99", msf(pctOf(remote, 99)), "ms", "Go API, p99", msf(pctOf(local, 99)), nil)
	rssIdle := peak.current()

	// 2. 100 clients at once, each create → exec → remove.
	const clients = 100
	lat := make([]time.Duration, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := time.Now()
			id, err := c.create(ctx, fmt.Sprintf("c%d", i))
			if err == nil {
				var out string
				if out, err = c.exec(ctx, id, "echo", "hi"); err == nil && out != "hi\n" {
					err = fmt.Errorf("output %q", out)
				}
				if rerr := c.remove(ctx, id); err == nil {
					err = rerr
				}
			}
			lat[i], errs[i] = time.Since(s), err
		}()
	}
	wg.Wait()
	all := time.Since(t0)
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
			if failed <= 3 {
				fmt.Println("client failed:", err)
			}
		}
	}
	rec.add(fmt.Sprintf("%d clients create → exec → remove at once: all done", clients), all.Seconds(), "s", nil)
	rec.add("  per client, p50", msf(median(lat)), "ms", nil)
	rec.add("  per client, p99", msf(pctOf(lat, 99)), "ms", nil)
	rec.add("  clients failed", float64(failed), "", atMost(0))

	// 3. 1,000 streaming execs at once over 20 boxes.
	const nBoxes, nExecs = 20, 1000
	ids := make([]string, nBoxes)
	for i := range ids {
		if ids[i], err = c.create(ctx, fmt.Sprintf("s%d", i)); err != nil {
			return err
		}
		if _, err := c.exec(ctx, ids[i], "true"); err != nil {
			return err
		}
	}
	peak.reset()
	lat = make([]time.Duration, nExecs)
	errs = make([]error, nExecs)
	t0 = time.Now()
	for i := range nExecs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := time.Now()
			out, err := c.exec(ctx, ids[i%nBoxes], "sh", "-c", "i=0; while [ $i -lt 200 ]; do echo line $i of a streamed output; i=$((i+1)); done")
			if err == nil && strings.Count(out, "\n") != 200 {
				err = fmt.Errorf("%d lines", strings.Count(out, "\n"))
			}
			lat[i], errs[i] = time.Since(s), err
		}()
	}
	wg.Wait()
	all = time.Since(t0)
	failed = 0
	for _, err := range errs {
		if err != nil {
			failed++
			if failed <= 3 {
				fmt.Println("stream failed:", err)
			}
		}
	}
	rec.add(fmt.Sprintf("%d streaming execs at once over %d boxes: all done", nExecs, nBoxes), all.Seconds(), "s", nil)
	rec.add("  per exec, p50", msf(median(lat)), "ms", nil)
	rec.add("  per exec, p99", msf(pctOf(lat, 99)), "ms", nil)
	rec.add("  execs failed", float64(failed), "", atMost(0))
	rec.vs("server RSS, peak during the streams", float64(peak.max())/1024, "MiB", "server RSS with one box, idle", float64(rssIdle)/1024, nil)
	for _, id := range ids {
		c.remove(ctx, id)
	}
	c.remove(ctx, id)
	return nil
}

// pctOf is percentile p (0-100) of unsorted durations.
func pctOf(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return pct(s, p)
}

// rssPeak samples a process's RSS (KiB) every 50 ms.
type rssPeak struct {
	pid  int
	mu   sync.Mutex
	peak int
}

func (r *rssPeak) current() int { return rssKB(r.pid) }
func (r *rssPeak) max() int     { r.mu.Lock(); defer r.mu.Unlock(); return r.peak }
func (r *rssPeak) reset()       { r.mu.Lock(); r.peak = 0; r.mu.Unlock() }

func (r *rssPeak) watch() func() {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				v := rssKB(r.pid)
				r.mu.Lock()
				r.peak = max(r.peak, v)
				r.mu.Unlock()
			}
		}
	}()
	return func() { close(done) }
}

// restClient speaks BoxLite's REST API as its clients do.
type restClient struct {
	url, key string
	http     *http.Client
}

func (c *restClient) do(ctx context.Context, method, path string, body any, out any) error {
	var r io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s %s", method, path, resp.Status, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (c *restClient) create(ctx context.Context, name string) (string, error) {
	var b struct {
		BoxID string `json:"box_id"`
	}
	err := c.do(ctx, "POST", "/v1/boxes", map[string]any{"name": name, "image": "alpine:latest", "memory_mib": 128}, &b)
	return b.BoxID, err
}

func (c *restClient) remove(ctx context.Context, id string) error {
	return c.do(ctx, "DELETE", "/v1/boxes/"+id+"?force=true", nil, nil)
}

// exec runs a command and returns its stdout, read over the attach.
func (c *restClient) exec(ctx context.Context, id, cmd string, args ...string) (string, error) {
	var e struct {
		ExecutionID string `json:"execution_id"`
	}
	if err := c.do(ctx, "POST", "/v1/boxes/"+id+"/exec", map[string]any{"command": cmd, "args": args}, &e); err != nil {
		return "", err
	}
	ws, _, err := websocket.Dial(ctx, strings.Replace(c.url, "http", "ws", 1)+"/v1/boxes/"+id+"/executions/"+e.ExecutionID+"/attach",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + c.key}}})
	if err != nil {
		return "", err
	}
	defer ws.CloseNow()
	var out bytes.Buffer
	for {
		typ, data, err := ws.Read(ctx)
		if err != nil {
			return out.String(), err
		}
		if typ == websocket.MessageBinary && len(data) > 0 && data[0] == 1 {
			out.Write(data[1:])
		}
		if typ == websocket.MessageText && bytes.Contains(data, []byte(`"exit"`)) {
			return out.String(), nil
		}
	}
}
