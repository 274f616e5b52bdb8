package restapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/restapi/wire"
)

// BoxLite's REST tunnel (read from its client, 0.10.8): POST
// /boxes/{id}/network/tunnel?port=N answers a descriptor {"uri": U}; the
// client then opens a connection to U's authority (TLS for https) and sends
// `CONNECT <authority> HTTP/1.1` with Host: <authority> and no other
// header: nothing of the API key travels. U must therefore carry the
// tunnel's own credential: here it is the URI's userinfo, a random token
// (https://TOKEN@host:port) naming one box and one port, checked on every
// CONNECT. Go's HTTP server refuses a Host header with userinfo, so the
// CONNECTs are served on a listener of their own (ServeTunnelConn).

// Tunnel bounds.
const (
	// TunnelTokenLifetime is how long a descriptor admits new connections
	// (open ones are not cut when it ends, nor by revoke_tunnel).
	TunnelTokenLifetime = 24 * time.Hour
	// tunnelGrantsPerKey caps the descriptors of one key alive at once.
	tunnelGrantsPerKey = 1024
	// TunnelConnsPerKey caps the connections one key's tunnels carry at
	// once (as a local forwarder's MaxForwardedConns).
	TunnelConnsPerKey = boxlite.MaxForwardedConns
	// tunnelHeadBytes bounds a CONNECT request's head.
	tunnelHeadBytes = 8 << 10
	// TunnelHandshakeTimeout bounds a connection's TLS handshake and
	// CONNECT head, and the dial into the box.
	TunnelHandshakeTimeout = 10 * time.Second
	// tunnelDialTimeout bounds the box's start (when stopped) and its
	// agent's connect to the port.
	tunnelDialTimeout = 2 * time.Minute
	maxPort           = 65535
)

type tunnelGrant struct {
	box, key string
	port     int
	expires  time.Time
}

// tunnelBook holds the live descriptors by their token's hash, and the
// connections each key's tunnels carry.
type tunnelBook struct {
	mu     sync.Mutex
	grants map[[32]byte]tunnelGrant
	conns  map[string]int
	// base is what a descriptor's URI is made of: the scheme and port of
	// the CONNECT listener, or a fixed URL (SetTunnelEndpoint).
	scheme string
	port   int
	fixed  *url.URL
}

func newTunnelBook() *tunnelBook {
	return &tunnelBook{grants: map[[32]byte]tunnelGrant{}, conns: map[string]int{}}
}

// SetTunnelEndpoint says where CONNECTs are served: scheme ("http" or
// "https") and port, on the host the client reached the API by; or, when
// public is set, that URL (a proxy in front). Until it is called, tunnels
// answer 501.
func (a *API) SetTunnelEndpoint(scheme string, port int, public string) error {
	b := a.tunnels
	b.mu.Lock()
	defer b.mu.Unlock()
	if public != "" {
		u, err := url.Parse(public)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "tunnel URL %q: want http(s)://HOST[:PORT]", public)
		}
		b.fixed = u
	}
	b.scheme, b.port = scheme, port
	return nil
}

// tunnelTarget is the box and the port (query parameter) a tunnel route
// names.
func (a *API) tunnelTarget(r *http.Request) (*boxlite.Box, int, error) {
	q, err := query(r, "port")
	if err != nil {
		return nil, 0, err
	}
	port, err := strconv.Atoi(q["port"])
	if err != nil || port < 1 || port > maxPort {
		return nil, 0, errdefs.Errorf(errdefs.ErrInvalidArgument, "query parameter port=%q: want 1 to %d", truncate(q["port"]), maxPort)
	}
	b, err := a.getBox(r.Context(), r)
	return b, port, err
}

func (a *API) prepareTunnel(w http.ResponseWriter, r *http.Request) error {
	b, port, err := a.tunnelTarget(r)
	if err != nil {
		return err
	}
	bk := a.tunnels
	bk.mu.Lock()
	defer bk.mu.Unlock()
	if bk.scheme == "" {
		return notServed("tunnels without a CONNECT listener")
	}
	now := time.Now()
	held := 0
	for h, g := range bk.grants {
		if now.After(g.expires) {
			delete(bk.grants, h)
		} else if g.key == caller(r) {
			held++
		}
	}
	if held >= tunnelGrantsPerKey {
		return newError(errQuota, "key %q holds %d tunnel descriptors, its limit; they expire %s after they were made", caller(r), held, TunnelTokenLifetime)
	}
	var raw [32]byte
	rand.Read(raw[:])
	token := "bxt_" + base64.RawURLEncoding.EncodeToString(raw[:])
	bk.grants[sha256.Sum256([]byte(token))] = tunnelGrant{box: b.ID(), key: caller(r), port: port, expires: now.Add(TunnelTokenLifetime)}
	u := url.URL{Scheme: bk.scheme, User: url.User(token)}
	if bk.fixed != nil {
		u.Scheme, u.Host = bk.fixed.Scheme, bk.fixed.Host
	} else {
		host := r.Host
		if h, _, err := net.SplitHostPort(r.Host); err == nil {
			host = h
		}
		u.Host = net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(bk.port))
	}
	writeJSON(w, http.StatusOK, wire.TunnelDescriptor{URI: u.String()})
	return nil
}

// revokeTunnel withdraws every descriptor of a box's port: new CONNECTs
// with them are refused; open connections go on.
func (a *API) revokeTunnel(w http.ResponseWriter, r *http.Request) error {
	b, port, err := a.tunnelTarget(r)
	if err != nil {
		return err
	}
	bk := a.tunnels
	bk.mu.Lock()
	for h, g := range bk.grants {
		if g.box == b.ID() && g.port == port {
			delete(bk.grants, h)
		}
	}
	bk.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// take finds a live descriptor's grant by its token and takes one of its
// key's connection slots (release gives it back); a refusal says its
// status.
func (bk *tunnelBook) take(token string) (g tunnelGrant, release func(), status int, err error) {
	bk.mu.Lock()
	defer bk.mu.Unlock()
	g, ok := bk.grants[sha256.Sum256([]byte(token))]
	if !ok || token == "" || time.Now().After(g.expires) {
		return g, nil, http.StatusForbidden, errors.New("no such tunnel: the descriptor is unknown, expired or revoked")
	}
	if bk.conns[g.key] >= TunnelConnsPerKey {
		return g, nil, http.StatusTooManyRequests, fmt.Errorf("%d tunnel connections of this key are open, its limit", TunnelConnsPerKey)
	}
	bk.conns[g.key]++
	var once sync.Once
	return g, func() {
		once.Do(func() {
			bk.mu.Lock()
			if bk.conns[g.key]--; bk.conns[g.key] <= 0 {
				delete(bk.conns, g.key)
			}
			bk.mu.Unlock()
		})
	}, 0, nil
}

// headLimit lets a CONNECT head through up to a bound, then nothing until
// lifted (the bytes after the head are the tunnel's).
type headLimit struct {
	r io.Reader
	n int
}

func (h *headLimit) Read(p []byte) (int, error) {
	if h.n <= 0 {
		return 0, errors.New("CONNECT request head too large")
	}
	if len(p) > h.n {
		p = p[:h.n]
	}
	n, err := h.r.Read(p)
	h.n -= n
	return n, err
}

// ServeTunnelConn serves one connection of the CONNECT listener (already
// TLS when the server is): one CONNECT whose userinfo is a live tunnel
// token, then the bytes both ways between the connection and the box's
// port, each side's half-close passed on. It returns when the connection
// ends; closing c ends it. Its head and the dial have a deadline
// (TunnelHandshakeTimeout); a refusal is a short plain-text answer.
func (a *API) ServeTunnelConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(TunnelHandshakeTimeout))
	if tc, ok := c.(interface{ HandshakeContext(context.Context) error }); ok {
		if err := tc.HandshakeContext(ctx); err != nil {
			return
		}
	}
	lim := &headLimit{r: c, n: tunnelHeadBytes}
	br := bufio.NewReaderSize(lim, 4096)
	req, err := http.ReadRequest(br)
	if err != nil {
		refuseTunnel(c, http.StatusBadRequest, "malformed CONNECT request")
		return
	}
	if req.Method != http.MethodConnect {
		refuseTunnel(c, http.StatusMethodNotAllowed, "this listener serves CONNECT only (BoxLite's tunnel descriptors)")
		return
	}
	token := ""
	if req.URL != nil && req.URL.User != nil {
		token = req.URL.User.Username()
	}
	g, release, status, err := a.tunnels.take(token)
	if err != nil {
		refuseTunnel(c, status, err.Error())
		return
	}
	defer release()
	if kc, ok := a.auth.(interface{ HasKey(string) bool }); ok && !kc.HasKey(g.key) {
		refuseTunnel(c, http.StatusForbidden, "the key that made this tunnel was removed")
		return
	}
	// The head is read: the dial (which may start the box) has its own
	// deadline, and the answer gets a fresh one after it.
	c.SetDeadline(time.Time{})
	dctx, cancel := context.WithTimeout(ctx, TunnelHandshakeTimeout+tunnelDialTimeout)
	t, err := a.dialTunnel(dctx, g)
	cancel()
	c.SetWriteDeadline(time.Now().Add(TunnelHandshakeTimeout))
	if err != nil {
		refuseTunnel(c, answerFor(err).Status, err.Error())
		return
	}
	defer t.Close()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return
	}
	c.SetDeadline(time.Time{})
	// What bufio read past the head, then the connection itself (whole
	// reads, not bufio's 4 KiB: each write is a frame to the box).
	held, _ := br.Peek(br.Buffered())
	stop := context.AfterFunc(ctx, func() { c.Close(); t.Close() })
	defer stop()
	t.Carry(c, io.MultiReader(bytes.NewReader(held), c))
}

// dialTunnel opens the grant's tunnel, starting a box that is not running
// (as an exec does).
func (a *API) dialTunnel(ctx context.Context, g tunnelGrant) (*boxlite.TunnelConn, error) {
	b, err := a.rt.Get(ctx, g.box)
	if err != nil {
		return nil, err
	}
	if b.Info().State != boxlite.StateRunning {
		if err := b.Start(ctx); err != nil {
			return nil, err
		}
	}
	return b.DialTunnel(ctx, g.port)
}

// refuseTunnel answers a CONNECT it will not carry: one line BoxLite's
// client reads as the reason.
func refuseTunnel(c net.Conn, code int, msg string) {
	if len(msg) > 400 {
		msg = msg[:400]
	}
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n",
		code, http.StatusText(code), len(msg)+1, msg)
}
