package image

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxlite/boxlite/errdefs"
)

// stallingHost accepts connections and never answers, as a dead mirror
// behind a live load balancer does. It returns host:port.
func stallingHost(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

var short = Timeouts{Connect: time.Second, Request: 300 * time.Millisecond, Idle: 300 * time.Millisecond}

// layerBlobs wraps a registry handler so that GETs of its layer blobs (not
// the config) are served by serve instead.
func layerBlobs(t *testing.T, digests []string, serve func(w http.ResponseWriter, r *http.Request, body []byte)) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for _, d := range digests {
				if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+d) {
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, r)
					for k, v := range rec.Header() {
						w.Header()[k] = v
					}
					serve(w, r, rec.Body.Bytes())
					return
				}
			}
			h.ServeHTTP(w, r)
		})
	}
}

func TestPullStalledMirrorFallsBack(t *testing.T) {
	ctx := context.Background()
	src := twoLayerImage(t, "stall")
	m, _ := src.Manifest()
	var layers []string
	for _, l := range m.Layers {
		layers = append(layers, l.Digest.String())
	}
	good := newRegistry(t, nil)
	good.push(t, "library/app:1", src)
	// A mirror that answers everything but sends layer blobs' headers and a
	// first byte, then nothing.
	stop := make(chan struct{})
	headersOnly := newRegistry(t, layerBlobs(t, layers, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Write(body[:1])
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer close(stop)
	headersOnly.push(t, "library/app:1", src)
	upstream := newRegistry(t, nil)
	upstream.push(t, "library/app:1", src)

	for _, c := range []struct {
		name, mirror, want string
	}{
		{"mirror accepts and never answers", "http://" + stallingHost(t), "no whole answer within 300ms"},
		{"mirror stalls layer downloads", "http://" + headersOnly.host, "no data for 300ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, dir := openStore(t)
			mirrors := Mirrors{upstream.host: {c.mirror, "http://" + good.host}}
			start := time.Now()
			res, err := s.Pull(ctx, upstream.host+"/library/app:1", WithMirrors(mirrors), WithInsecure(upstream.host), WithTimeouts(short))
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("pull took %v", d)
			}
			t.Log(res.Failed)
			if res.Source != "http://"+good.host || len(res.Failed) != 1 || !errors.Is(res.Failed[0], errdefs.ErrTimeout) || !strings.Contains(res.Failed[0].Error(), c.want) {
				t.Fatalf("source %s, failed %v", res.Source, res.Failed)
			}
			if entries, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(entries) != 0 {
				t.Errorf("tmp not empty: %v", entries)
			}
			if _, err := s.Rootfs(ctx, res.Image); err != nil {
				t.Error(err)
			}
		})
	}

	// Only the stalling mirror, then the registry.
	s, _ := openStore(t)
	res, err := s.Pull(ctx, upstream.host+"/library/app:1", WithMirrors(Mirrors{upstream.host: {"http://" + headersOnly.host}}),
		WithInsecure(upstream.host), WithTimeouts(short))
	if err != nil || res.Source != upstream.host || len(res.Failed) != 1 {
		t.Fatalf("%+v, %v", res, err)
	}
}

func TestPullStalledRegistryTimesOut(t *testing.T) {
	stalled := stallingHost(t)
	s, dir := openStore(t)
	before := snapshot(t, dir)
	start := time.Now()
	_, err := s.Pull(context.Background(), stalled+"/app:1", WithInsecure(stalled), WithTimeouts(short))
	if !errors.Is(err, errdefs.ErrTimeout) {
		t.Fatalf("want a timeout, got %v", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("took %v", d)
	}
	if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
		t.Errorf("the store changed")
	}

	// The context still ends a pull at once, with the default timeouts.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start = time.Now()
	if _, err := s.Pull(ctx, stalled+"/app:1", WithInsecure(stalled)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancel took %v", d)
	}
}

// A layer that arrives slowly but steadily (a few bytes every 100 ms, for
// longer than the idle timeout in all) is not cut off.
func TestPullSlowSteadyBlob(t *testing.T) {
	src := twoLayerImage(t, "slow")
	m, _ := src.Manifest()
	var layers []string
	for _, l := range m.Layers {
		layers = append(layers, l.Digest.String())
	}
	var took sync.Map
	reg := newRegistry(t, layerBlobs(t, layers[:1], func(w http.ResponseWriter, r *http.Request, body []byte) {
		start := time.Now()
		chunk := len(body)/12 + 1
		for len(body) > 0 {
			n := min(chunk, len(body))
			if _, err := w.Write(body[:n]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			body = body[n:]
			time.Sleep(100 * time.Millisecond)
		}
		took.Store(r.URL.Path, time.Since(start))
	}))
	reg.push(t, "app:1", src)
	s, _ := openStore(t)
	res, err := s.Pull(context.Background(), reg.host+"/app:1", WithInsecure(reg.host), WithTimeouts(short))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed) != 0 || res.Source != reg.host {
		t.Errorf("%+v", res)
	}
	took.Range(func(k, v any) bool {
		if v.(time.Duration) < 3*short.Idle {
			t.Errorf("%s took %v, not longer than the idle timeout", k, v)
		}
		return true
	})
}

func TestTimeoutsDefaults(t *testing.T) {
	if got := (Timeouts{Idle: time.Minute}).withDefaults(); got != (Timeouts{Connect: DefaultTimeouts.Connect, Request: DefaultTimeouts.Request, Idle: time.Minute}) {
		t.Errorf("%+v", got)
	}
	if got := fmt.Sprint(DefaultTimeouts); got != "{15s 30s 30s}" {
		t.Errorf("defaults %s", got)
	}
}
