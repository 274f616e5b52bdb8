package netstack

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

// HTTP/2 from the box to a secret's host: the box's connection is served
// by an HTTP/2 server (golang.org/x/net/http2) whose every request goes
// through the same substitution as an HTTP/1.1 one (substitute: the request
// line's path, the headers, the body streamed through the replacer, only
// when :authority is the host the secrets are for), then to the real server
// over a transport of this connection's own: HTTP/2 when the server offers
// it, else HTTP/1.1, every connection verified against the host's roots for
// the intercepted name and dialed to the address the box was headed for.
const (
	h2Streams     = 100             // concurrent streams the box may open on one connection
	h2UpConns     = 8               // connections to the real server per box connection, at once
	h2UpDials     = 64              // and in its whole life (each is kept until it ends)
	h2IdleTimeout = 5 * time.Minute // a box connection with no stream open
)

// hopHeaders are a connection's own, never passed on an HTTP/2 answer.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade"}

// proxyH2 serves the box's HTTP/2 connection guest (TLS done, "h2"
// negotiated) until it ends, passing its requests to target.
func (n *Stack) proxyH2(guest *tls.Conn, sni, target string, pairs [][2][]byte) {
	var mu sync.Mutex
	var ups []net.Conn
	tr := &http.Transport{
		DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			d := tls.Dialer{NetDialer: &net.Dialer{Timeout: dialTimeout},
				Config: &tls.Config{ServerName: sni, RootCAs: n.secrets.Roots, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}}
			mu.Lock()
			dialed := len(ups)
			mu.Unlock()
			if dialed >= h2UpDials {
				return nil, fmt.Errorf("this connection of the box dialed %s %d times; open another", truncate(sni, 253), h2UpDials)
			}
			ctx, cancel := context.WithTimeout(ctx, upstreamWait)
			defer cancel()
			c, err := d.DialContext(ctx, "tcp", target)
			if err != nil {
				n.stats.tcpErrors.Add(1)
				n.logOnce("tls-out "+sni, "network: secrets: TLS to %s (%s) failed: %v", truncate(sni, 253), target, err)
				return nil, err
			}
			if !n.track(c) {
				c.Close()
				return nil, net.ErrClosed
			}
			mu.Lock()
			ups = append(ups, c)
			mu.Unlock()
			return c, nil
		},
		ForceAttemptHTTP2:      true,
		MaxConnsPerHost:        h2UpConns,
		MaxIdleConns:           h2UpConns,
		MaxIdleConnsPerHost:    h2UpConns,
		IdleConnTimeout:        h2IdleTimeout,
		TLSHandshakeTimeout:    upstreamWait,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: maxHead,
		DisableCompression:     true, // the box's Accept-Encoding goes as it is; the answer comes back as sent
	}
	defer func() {
		tr.CloseIdleConnections()
		mu.Lock()
		for _, c := range ups {
			c.Close()
			n.untrack(c)
		}
		mu.Unlock()
	}()
	srv := &http2.Server{MaxConcurrentStreams: h2Streams, IdleTimeout: h2IdleTimeout}
	srv.ServeConn(guest, &http2.ServeConnOpts{
		Context:    n.ctx,
		BaseConfig: &http.Server{MaxHeaderBytes: maxHead, ReadHeaderTimeout: helloWait},
		Handler:    h2Handler{tr: tr, sni: sni, pairs: pairs},
	})
}

type h2Handler struct {
	tr    http.RoundTripper
	sni   string
	pairs [][2][]byte
}

func (h h2Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	out := r.Clone(r.Context())
	if sameHost(r.Host, h.sni) {
		substitute(out, h.pairs)
	}
	out.RequestURI = ""
	// Every request goes to target whatever its :authority (out.Host keeps
	// it): one pool key, so the transport's bounds hold for the connection.
	out.URL.Scheme, out.URL.Host = "https", h.sni
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = []string{""} // none, as the box sent
	}
	resp, err := h.tr.RoundTrip(out)
	if err != nil {
		http.Error(w, "boxlite: the upstream server failed: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for _, k := range hopHeaders {
		resp.Header.Del(k)
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	for k := range resp.Trailer {
		w.Header().Add("Trailer", k)
	}
	w.WriteHeader(resp.StatusCode)
	copyFlushing(w, resp.Body)
	for k, vs := range resp.Trailer {
		w.Header()[http.TrailerPrefix+k] = vs
	}
}

// copyFlushing passes an answer's body on as it comes (a stream of events
// reaches the box as the server sends it).
func copyFlushing(w http.ResponseWriter, body io.Reader) {
	f, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		k, err := body.Read(buf)
		if k > 0 {
			if _, werr := w.Write(buf[:k]); werr != nil {
				return
			}
			if f != nil {
				f.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// negotiatedH2 reports whether the box's TLS chose HTTP/2.
func negotiatedH2(c *tls.Conn) bool {
	return strings.EqualFold(c.ConnectionState().NegotiatedProtocol, "h2")
}
