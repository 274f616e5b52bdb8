// Package serve is `boxlite serve`'s edge: the listener and its TLS
// policy, keys, request ids, the access log, Prometheus metrics and a
// graceful shutdown, around the APIs it serves (internal/restapi: BoxLite's
// REST API) over one runtime.
package serve

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/e2b"
	"github.com/boxlite/boxlite/internal/restapi"
)

// DefaultListen is BoxLite serve's address.
const DefaultListen = "127.0.0.1:8100"

// Config configures a server.
type Config struct {
	Listen           string // host:port; default DefaultListen
	TLSCert, TLSKey  string // PEM files; both or neither
	InsecureNoTLS    bool   // allow a non-loopback listen without TLS
	KeysFile         string // required: see ReadKeys
	Limits           restapi.Limits
	AccessLog        io.Writer     // JSON lines; nil: none
	ShutdownTimeout  time.Duration // default 30s
	MaxHeaderBytes   int           // default 64 KiB
	ReadHeaderTimout time.Duration // default 10s
	// E2BTemplates maps E2B template ids to images (nil: e2b.DefaultTemplates).
	E2BTemplates map[string]string
	// TunnelListen is where BoxLite's tunnel CONNECTs are served (TLS as
	// the API); default: a free port on Listen's host.
	TunnelListen string
	// TunnelURL, when set, is the base of the descriptors' URIs
	// (http(s)://HOST[:PORT] of a proxy in front of TunnelListen); default:
	// the host the client reached the API by, TunnelListen's port.
	TunnelURL string
}

// Server serves the APIs over a runtime.
type Server struct {
	cfg     Config
	rt      *boxlite.Runtime
	api     *restapi.API
	e2b     *e2b.Server
	keys    *keyring
	srv     *http.Server
	ln      net.Listener
	tunnels *tunnelServer
	metrics *promMetrics
	log     *slog.Logger
}

// New checks cfg and listens; Serve then serves until its context ends.
func New(cfg Config, rt *boxlite.Runtime) (*Server, error) {
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = 64 << 10
	}
	if cfg.ReadHeaderTimout <= 0 {
		cfg.ReadHeaderTimout = 10 * time.Second
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "--tls-cert and --tls-key go together")
	}
	tlsOn := cfg.TLSCert != ""
	if err := checkListen("--listen", cfg.Listen, tlsOn, cfg.InsecureNoTLS); err != nil {
		return nil, err
	}
	// Tunnel tokens travel in the CONNECTs as keys do in requests.
	if cfg.TunnelListen != "" {
		if err := checkListen("--tunnel-listen", cfg.TunnelListen, tlsOn, cfg.InsecureNoTLS); err != nil {
			return nil, err
		}
	}
	keys, err := newKeyring(cfg.KeysFile)
	if err != nil {
		return nil, err
	}
	state := filepath.Join(rt.Home(), "serve")
	tmp := filepath.Join(state, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, err
	}
	if err := clearDir(tmp); err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "boxlite serve: "+format+"\n", args...) }
	api, err := restapi.New(restapi.Options{Runtime: rt, Auth: keys, Limits: cfg.Limits, StateDir: state, TempDir: tmp, Logf: logf})
	if err != nil {
		return nil, err
	}
	e2bAPI, err := e2b.New(e2b.Options{Runtime: rt, Auth: keys.AuthenticateKey, Templates: cfg.E2BTemplates, StateDir: state, TempDir: tmp,
		Limits: e2b.Limits{SandboxesPerKey: cfg.Limits.BoxesPerKey, TransferBytes: cfg.Limits.TransferBytes, JSONBodyBytes: cfg.Limits.JSONBodyBytes}, Logf: logf})
	if err != nil {
		api.Close()
		return nil, err
	}
	s := &Server{cfg: cfg, rt: rt, api: api, e2b: e2bAPI, keys: keys, metrics: newPromMetrics(), log: slog.New(slog.NewJSONHandler(discardOr(cfg.AccessLog), nil))}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	mux.Handle("GET /metrics", s.authed(http.HandlerFunc(s.serveMetrics)))
	mux.Handle("/", api)
	// E2B's API: its control plane under /e2b, and every request bound for
	// a sandbox (E2b-Sandbox-Id) whatever its path.
	root := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e2b.Wants(r) {
			e2bAPI.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
	// E2B's SDKs speak HTTP/2 by default: without TLS, with prior knowledge.
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	protocols.SetUnencryptedHTTP2(true)
	s.srv = &http.Server{
		Protocols:         protocols,
		Handler:           s.edge(root),
		ReadHeaderTimeout: cfg.ReadHeaderTimout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		api.Close()
		e2bAPI.Close()
		return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	ln = newLingerListener(ln)
	var tlsCfg *tls.Config
	if tlsOn {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			ln.Close()
			api.Close()
			e2bAPI.Close()
			return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "TLS key pair: %v", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, tlsCfg)
	}
	s.ln = ln
	if s.tunnels, err = listenTunnels(cfg.TunnelListen, cfg.Listen, cfg.TunnelURL, tlsCfg, api); err != nil {
		ln.Close()
		api.Close()
		e2bAPI.Close()
		return nil, err
	}
	return s, nil
}

// Addr is where the server listens.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve serves until ctx ends, then shuts down gracefully: no new
// requests, those in flight get ShutdownTimeout, attaches are closed. The
// boxes, detached, keep running.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	tctx, stopTunnels := context.WithCancel(context.Background())
	defer stopTunnels()
	go s.tunnels.serve(tctx)
	defer s.tunnels.close()
	select {
	case err := <-errc:
		s.api.Close()
		s.e2b.Close()
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	err := s.srv.Shutdown(sctx)
	s.api.Close()
	s.e2b.Close()
	if e := <-errc; !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	return err
}

// checkListen refuses a listen (flag names it) beyond loopback without
// TLS, unless asked.
func checkListen(flag, addr string, tlsOn, insecure bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s %q: %v", flag, addr, err)
	}
	if tlsOn || insecure {
		return nil
	}
	ips := []net.IP{net.ParseIP(host)}
	if ips[0] == nil {
		if host == "" {
			ips = nil // every interface
		} else if addrs, err := net.LookupIP(host); err == nil {
			ips = addrs
		} else {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s %q: %v", flag, addr, err)
		}
	}
	loopback := len(ips) > 0
	for _, ip := range ips {
		loopback = loopback && ip.IsLoopback()
	}
	if !loopback {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s %s reaches beyond this machine: keys would cross the network in clear; give --tls-cert and --tls-key, or --insecure-no-tls if a proxy in front terminates TLS", flag, addr)
	}
	return nil
}

// authed lets only keyed requests through to h.
func (s *Server) authed(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.keys.Authenticate(r); err != nil {
			restapi.WriteError(w, r, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// statusWriter records what a handler answered, for the log and metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// edge gives every request an id, a recovered panic a 500, and a line in
// the access log (never its headers: keys travel there) and metrics.
func (s *Server) edge(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var id [10]byte
		rand.Read(id[:])
		rid := "req_" + hex.EncodeToString(id[:])
		w.Header().Set("X-Request-Id", rid)
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("panic", "request_id", rid, "panic", fmt.Sprint(p))
				if sw.status == 0 {
					restapi.WriteError(sw, r, errdefs.Errorf(errdefs.ErrInternal, "the server failed on this request (%s)", rid))
				}
			}
			route := r.Pattern
			if route == "" {
				route = "unmatched"
			}
			d := time.Since(start)
			s.metrics.observe(r.Method, route, sw.status, d)
			s.log.Info("request", "request_id", rid, "remote", r.RemoteAddr, "method", r.Method,
				"route", route, "path", r.URL.Path, "query", r.URL.RawQuery, "status", sw.status, "bytes", sw.bytes,
				"duration_ms", d.Milliseconds(), "key", restapi.Caller(r))
		}()
		h.ServeHTTP(sw, r)
	})
}

func discardOr(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// clearDir empties the spool of a server that did not end cleanly.
func clearDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// Hijack hands the connection to a WebSocket upgrade.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the connection cannot be hijacked")
	}
	w.status = http.StatusSwitchingProtocols
	return h.Hijack()
}

// Flush sends what is buffered.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
