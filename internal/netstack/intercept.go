package netstack

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// A connection of the box to an address DNS gave it for a secret's host, on
// that host's port, is accepted before it is dialed: the stack reads its
// TLS ClientHello. If the server name is a secret's host, the stack ends the
// box's TLS itself with a certificate from the box's CA, opens its own TLS
// to the real server (verified against the host's roots for that name), and
// passes HTTP/1.1 requests (or HTTP/2 ones, when the box's TLS chooses h2:
// intercept_h2.go) on with the placeholders of that host's secrets
// replaced by their values, in the request line, the headers and the body.
// Anything else (another name, no TLS) goes on untouched to where it was
// headed, with the bytes already read.
const (
	helloWait    = 10 * time.Second // for the ClientHello
	upstreamWait = 10 * time.Second // dial and TLS handshake with the real server
	maxHead      = 1 << 20          // bytes of a request line and headers
	// maxBuffered: a body of a known length up to this is read whole,
	// replaced and sent with its new length; a longer one (or one whose
	// client waits for 100-continue) is sent chunked as it streams.
	maxBuffered = 1 << 20
)

var errPassOn = errors.New("not a secret's host")

// peekConn reads like its Conn and keeps what it read (up to a bound) so
// it can be replayed; while muted it drops writes, so that a TLS handshake
// that is abandoned leaves the box's connection as it was.
type peekConn struct {
	net.Conn
	mu    sync.Mutex
	seen  []byte
	muted bool
	over  bool
}

func (c *peekConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	c.mu.Lock()
	if c.muted {
		if len(c.seen)+k > maxInterceptHead {
			c.over = true
		} else {
			c.seen = append(c.seen, p[:k]...)
		}
	}
	c.mu.Unlock()
	return k, err
}

func (c *peekConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	muted := c.muted
	c.mu.Unlock()
	if muted {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *peekConn) live() {
	c.mu.Lock()
	c.muted, c.seen = false, nil
	c.mu.Unlock()
}

// interceptTCP takes a candidate connection (secretState.candidate) to
// target, the host address route chose.
func (n *Stack) interceptTCP(r *tcp.ForwarderRequest, dst netip.Addr, port uint16, target string) {
	if n.tcpConns.Add(1) > MaxTCPConns {
		n.tcpConns.Add(-1)
		n.stats.dropped.Add(1)
		r.Complete(true)
		return
	}
	defer n.tcpConns.Add(-1)
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	r.Complete(false)
	if terr != nil {
		return
	}
	n.stats.tcp.Add(1)
	in := gonet.NewTCPConn(&wq, ep)
	if !n.track(in) {
		return
	}
	defer n.untrack(in)

	pc := &peekConn{Conn: in, muted: true}
	var sni string
	guest := tls.Server(pc, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			if h.ServerName == "" || len(n.secrets.pairs(h.ServerName, port)) == 0 {
				return nil, errPassOn
			}
			cert, err := n.secrets.leaf(h.ServerName)
			if err != nil {
				return nil, err
			}
			sni = strings.ToLower(h.ServerName)
			pc.live()
			return &tls.Config{Certificates: []tls.Certificate{*cert}, NextProtos: []string{"h2", "http/1.1"},
				MinVersion: tls.VersionTLS12}, nil
		},
	})
	ctx, cancel := context.WithTimeout(n.ctx, helloWait)
	err := guest.HandshakeContext(ctx)
	cancel()
	if sni == "" {
		// Not ours: on to the destination, with what was read.
		pc.mu.Lock()
		seen, over := pc.seen, pc.over
		pc.muted = false
		pc.mu.Unlock()
		if over || n.ctx.Err() != nil {
			return
		}
		in.SetReadDeadline(time.Time{})
		d := net.Dialer{Timeout: dialTimeout}
		out, err := d.DialContext(n.ctx, "tcp", target)
		if err != nil {
			n.stats.tcpErrors.Add(1)
			return
		}
		if !n.track(out) {
			return
		}
		defer n.untrack(out)
		if _, err := out.Write(seen); err != nil {
			return
		}
		splice(in, out)
		return
	}
	if err != nil {
		n.logOnce("tls-in "+sni, "network: secrets: TLS with the box for %s failed: %v", truncate(sni, 253), err)
		return
	}
	if negotiatedH2(guest) {
		n.proxyH2(guest, sni, target, n.secrets.pairs(sni, port))
		return
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: dialTimeout},
		Config: &tls.Config{ServerName: sni, RootCAs: n.secrets.Roots, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12}}
	ctx, cancel = context.WithTimeout(n.ctx, upstreamWait)
	up, err := d.DialContext(ctx, "tcp", target)
	cancel()
	if err != nil {
		// The box sees its connection end; the log says why.
		n.stats.tcpErrors.Add(1)
		n.logOnce("tls-out "+sni, "network: secrets: TLS to %s (%s) failed: %v", truncate(sni, 253), target, err)
		return
	}
	if !n.track(up) {
		return
	}
	defer n.untrack(up)
	proxyHTTP(guest, up.(*tls.Conn), sni, n.secrets.pairs(sni, port))
}

// capReader fails a read once left runs out: it bounds a request's head.
type capReader struct {
	r    io.Reader
	left int64
}

var errHeadTooLong = errors.New("request head too long")

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errHeadTooLong
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	k, err := c.r.Read(p)
	c.left -= int64(k)
	return k, err
}

// proxyHTTP passes the box's HTTP/1.1 requests on to up, secrets put in,
// and up's bytes back unchanged, until either side ends. A request whose
// Host is not sni goes on as it is (placeholders stay): the value goes
// only to the host it was given for.
func proxyHTTP(guest, up *tls.Conn, sni string, pairs [][2][]byte) {
	done := make(chan struct{})
	go func() {
		io.Copy(guest, up)
		guest.CloseWrite()
		close(done)
	}()
	defer func() {
		up.CloseWrite()
		<-done
	}()
	lim := &capReader{r: guest}
	br := bufio.NewReaderSize(lim, 16<<10)
	bw := bufio.NewWriterSize(up, 16<<10)
	for {
		lim.left = maxHead + int64(br.Buffered())
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		lim.left = math.MaxInt64
		if sameHost(req.Host, sni) {
			substitute(req, pairs)
		}
		if _, ok := req.Header["User-Agent"]; !ok {
			req.Header["User-Agent"] = []string{""} // none, as the box sent
		}
		if err := req.Write(bw); err != nil {
			return
		}
		if bw.Flush() != nil {
			return
		}
		if req.Header.Get("Upgrade") != "" {
			// After a switch of protocols: bytes, unchanged.
			io.Copy(up, br)
			return
		}
		if req.Close {
			return
		}
	}
}

func sameHost(hostport, name string) bool {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	return strings.EqualFold(strings.TrimSuffix(h, "."), name)
}

// substitute puts the secrets into req's request URI, headers and body.
func substitute(req *http.Request, pairs [][2][]byte) {
	if uri := replaceAll(req.RequestURI, pairs); uri != req.RequestURI {
		if u, err := url.ParseRequestURI(uri); err == nil {
			req.URL = u
		}
	}
	for k, vs := range req.Header {
		for i, v := range vs {
			vs[i] = replaceAll(v, pairs)
		}
		req.Header[k] = vs
	}
	if req.Body == nil || req.Body == http.NoBody {
		return
	}
	body := newReplacer(req.Body, pairs)
	if req.ContentLength >= 0 && req.ContentLength <= maxBuffered && !strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		b, err := io.ReadAll(body)
		if err != nil {
			// The request fails to write, and the connection ends.
			req.Body = io.NopCloser(failReader{err})
			return
		}
		req.Body, req.ContentLength = io.NopCloser(strings.NewReader(string(b))), int64(len(b))
		return
	}
	req.Body = io.NopCloser(body)
	req.ContentLength = -1
	req.TransferEncoding = []string{"chunked"}
}

type failReader struct{ err error }

func (f failReader) Read([]byte) (int, error) { return 0, f.err }
