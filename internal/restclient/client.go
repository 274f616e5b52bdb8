// Package restclient is a client of BoxLite's REST API as `boxlite serve`
// speaks it (internal/restapi, its bodies in internal/restapi/wire): a
// runtime whose boxes live on a server. Its Box and Execution have the
// methods of the local ones the C ABI uses, so capi serves a REST runtime
// through the same calls.
//
// The server is as untrusted as the network: every request has a deadline,
// every body read is bounded, error bodies are mapped back to the errdefs
// kind of their code (wire.KindOfCode, the server's own table) with their
// text cleaned (errdefs.New). The key goes in `Authorization: Bearer` and
// nowhere else: not in errors, not in logs.
package restclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/restapi/wire"
)

// Bounds of one exchange with the server.
const (
	// requestTimeout bounds every request that is not a stream (a create
	// pulls its image: minutes).
	requestTimeout = 10 * time.Minute
	// infoTimeout bounds the quick reads (a box's info, a list).
	infoTimeout = 30 * time.Second
	// maxJSONBody bounds a JSON answer; maxErrorBody an error's.
	maxJSONBody  = 16 << 20
	maxErrorBody = 64 << 10
)

// Client is a connection to one server with one key.
type Client struct {
	base        *url.URL // ends in /v1
	key         string
	hc          *http.Client
	outputLimit int64
}

// New checks o and makes a client; it does not call the server.
func New(o abi.RestOptions) (*Client, error) {
	bad := func(format string, args ...any) (*Client, error) {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "rest options: "+format, args...)
	}
	if o.URL == "" {
		return bad("url is required")
	}
	u, err := url.Parse(o.URL)
	if err != nil {
		return bad("url does not parse") // url.Error quotes the URL, which may hold a secret
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return bad("url scheme %q: want http or https", u.Scheme)
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return bad("url: want scheme://host[:port][/path], without user, query or fragment")
	}
	if u.Scheme == "http" && !o.InsecureHTTP && !isLoopback(u.Hostname()) {
		return bad("url %s://%s: plain http beyond loopback would send the key in clear; use https (or insecure_http behind a TLS proxy)", u.Scheme, u.Host)
	}
	if o.APIKey == "" {
		return bad("api_key is required")
	}
	if strings.ContainsAny(o.APIKey, "\r\n\x00 ") {
		return bad("api_key holds a space or control character")
	}
	if o.OutputLimit < 0 {
		return bad("output_limit_bytes %d is negative", o.OutputLimit)
	}
	limit := o.OutputLimit
	if limit == 0 {
		limit = abi.DefaultOutputLimitBytes
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if !strings.HasSuffix(u.Path, "/v1") {
		u.Path += "/v1"
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = requestTimeout
	hc := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // a redirect would carry the key elsewhere
	}}
	return &Client{base: u, key: o.APIKey, hc: hc, outputLimit: limit}, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Close releases the client's idle connections.
func (c *Client) Close() error {
	c.hc.CloseIdleConnections()
	return nil
}

// OutputLimit is what a collected stream keeps (RestOptions.OutputLimit).
func (c *Client) OutputLimit() int64 { return c.outputLimit }

// endpoint is the URL of path (under /v1, its segments escaped by the
// caller) with query q.
func (c *Client) endpoint(path string, q url.Values) string {
	u := *c.base
	u.Path += path
	u.RawPath = ""
	if q != nil {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// seg escapes one path segment (a box id or name, an execution id).
func seg(s string) string { return url.PathEscape(s) }

// request is one call: method, path, query, a body (JSON value or raw
// reader), its content type.
type request struct {
	method, path string
	query        url.Values
	json         any
	body         io.Reader
	ctype        string
}

// send makes the request and returns the response of a success status;
// a failure status is read (bounded) into the error of its kind.
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	body := r.body
	ctype := r.ctype
	if r.json != nil {
		data, err := json.Marshal(r.json)
		if err != nil {
			return nil, err
		}
		body, ctype = bytes.NewReader(data), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, r.method, c.endpoint(r.path, r.query), body)
	if err != nil {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s %s: %v", r.method, r.path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, transportError(r.method+" "+r.path, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, readError(r.method+" "+r.path, resp)
	}
	return resp, nil
}

// transportError is a failure to reach the server: a deadline is
// ErrTimeout, the rest ErrUnreachable.
func transportError(what string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its text repeats the URL
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return errdefs.Errorf(errdefs.ErrTimeout, "%s: %v", what, err)
	}
	if errors.Is(err, context.Canceled) {
		return errdefs.Errorf(errdefs.ErrClosed, "%s: %v", what, err)
	}
	return errdefs.Errorf(errdefs.ErrUnreachable, "%s: %v", what, err)
}

// readError maps an error answer to our kind: the code of BoxLite's error
// body, else the status.
func readError(what string, resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var eb wire.ErrorResponse
	if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
		return errdefs.New(wire.KindOfCode(eb.Error.Code), eb.Error.Message)
	}
	// Not BoxLite's body (a proxy in front answered): the status says what it can.
	return errdefs.New(kindOfStatus(resp.StatusCode), fmt.Sprintf("%s: the server answered %s", what, resp.Status))
}

// kindOfStatus is the kind an HTTP status says, for answers without
// BoxLite's error body.
func kindOfStatus(status int) errdefs.Kind {
	kind := errdefs.KindInternal
	switch status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusMethodNotAllowed:
		kind = errdefs.KindInvalidArgument
	case http.StatusNotFound:
		kind = errdefs.KindNotFound
	case http.StatusConflict:
		kind = errdefs.KindInvalidState
	case http.StatusRequestEntityTooLarge, http.StatusTooManyRequests:
		kind = errdefs.KindLimit
	case http.StatusNotImplemented:
		kind = errdefs.KindUnsupported
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		kind = errdefs.KindUnreachable
	case http.StatusGatewayTimeout:
		kind = errdefs.KindTimeout
	}
	return kind
}

// do makes a JSON call and decodes a JSON answer into out (nil: none),
// within requestTimeout.
func (c *Client) do(ctx context.Context, r request, out any) error {
	return c.doWithin(ctx, requestTimeout, r, out)
}

func (c *Client) doWithin(ctx context.Context, d time.Duration, r request, out any) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONBody+1))
	if err != nil {
		return transportError(r.method+" "+r.path, err)
	}
	if len(data) > maxJSONBody {
		return errdefs.Errorf(errdefs.ErrLimit, "%s %s: the answer is over %d bytes", r.method, r.path, maxJSONBody)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return errdefs.Errorf(errdefs.ErrInternal, "%s %s: the answer is not the JSON expected: %v", r.method, r.path, err)
	}
	return nil
}
