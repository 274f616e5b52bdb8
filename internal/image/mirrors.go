package image

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/boxlite/boxlite/errdefs"
)

// Mirrors maps a registry ("docker.io", "ghcr.io", "host:port") to the URLs
// of its mirrors, which Pull tries in order before the registry itself. A
// mirror's scheme says how to reach it: http:// is plain HTTP (and makes its
// host an insecure registry), https:// or none is TLS. A path in the URL goes
// before the repository, as pull-through caches that serve several registries
// name them: with "docker.io=https://harbor.example/hub", python:slim is
// pulled as harbor.example/hub/library/python:slim.
type Mirrors map[string][]string

// ParseMirrors reads a comma-separated list of REGISTRY=URL, the format of
// BOXLITE_REGISTRY_MIRRORS ("docker.io=http://127.0.0.1:5000,ghcr.io=https://m.example").
// A registry may appear several times; its mirrors keep the order given.
func ParseMirrors(spec string) (Mirrors, error) {
	m := Mirrors{}
	for _, item := range strings.Split(spec, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		reg, u, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("registry mirror %q: want REGISTRY=URL: %w", item, errdefs.ErrInvalidArgument)
		}
		m[strings.TrimSpace(reg)] = append(m[strings.TrimSpace(reg)], strings.TrimSpace(u))
	}
	if _, err := m.resolve(); err != nil {
		return nil, err
	}
	return m, nil
}

// mirror is one checked mirror of a registry.
type mirror struct {
	url    string        // as configured, to report which source served a pull
	reg    name.Registry // its host; insecure when plain HTTP
	prefix string        // repository prefix, from the URL's path
	plain  bool          // http://
}

// resolve checks m and returns its mirrors by registry, keyed as
// go-containerregistry names registries ("docker.io" is "index.docker.io").
func (m Mirrors) resolve() (map[string][]mirror, error) {
	out := map[string][]mirror{}
	for reg, urls := range m {
		r, err := name.NewRegistry(reg, name.StrictValidation)
		if err != nil || reg == "" {
			return nil, fmt.Errorf("registry mirror: invalid registry %q: %w", reg, errdefs.ErrInvalidArgument)
		}
		for _, raw := range urls {
			mr, err := parseMirror(raw)
			if err != nil {
				return nil, fmt.Errorf("registry mirror %q for %s: %w: %w", raw, reg, err, errdefs.ErrInvalidArgument)
			}
			out[r.RegistryStr()] = append(out[r.RegistryStr()], mr)
		}
	}
	return out, nil
}

func parseMirror(raw string) (mirror, error) {
	s := raw
	if !strings.Contains(s, "://") {
		s = "https://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return mirror{}, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return mirror{}, fmt.Errorf("scheme %q is not http or https", u.Scheme)
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return mirror{}, fmt.Errorf("want [http[s]://]HOST[:PORT][/PATH] (credentials come from the docker config)")
	}
	var opts []name.Option
	if u.Scheme == "http" {
		opts = append(opts, name.Insecure)
	}
	reg, err := name.NewRegistry(u.Host, opts...)
	if err != nil {
		return mirror{}, err
	}
	return mirror{url: raw, reg: reg, prefix: strings.Trim(u.Path, "/"), plain: u.Scheme == "http"}, nil
}

// ref is r as this mirror serves it.
func (mr mirror) ref(r name.Reference) name.Reference {
	repo := r.Context().RepositoryStr()
	if mr.prefix != "" {
		repo = mr.prefix + "/" + repo
	}
	base := mr.reg.Repo(repo)
	if d, ok := r.(name.Digest); ok {
		return base.Digest(d.DigestStr())
	}
	return base.Tag(r.Identifier())
}

// registryTransport refuses plain HTTP and checks TLS certificates, except
// for the hosts it is told are insecure, as Docker's insecure-registries do.
// Without it, go-containerregistry would fall back to plain HTTP for any
// loopback or private address on its own.
//
// It also bounds what a registry can make a pull wait for and read (see
// Timeouts and Limits): a blob download (GET …/blobs/…, and the redirects it
// leads to) must not stall for Idle, waiting for its headers or for any next
// byte; every other request (the ping, tokens, manifests, the config, whose
// digest small registers) must be answered whole within Request, and its
// body is cut at MaxManifestBytes (the config's at MaxConfigBytes), as is
// the body of any error response.
type registryTransport struct {
	secure, insecure *http.Transport
	hosts            map[string]bool // host[:port] as in URLs
	timeouts         Timeouts
	limits           Limits

	mu          sync.Mutex
	smallDigest map[string]bool // blobs fetched as small requests: "sha256:…"
}

func newRegistryTransport(hosts map[string]bool, t Timeouts, lim Limits) *registryTransport {
	secure := remote.DefaultTransport.(*http.Transport).Clone()
	secure.DialContext = (&net.Dialer{Timeout: t.Connect, KeepAlive: 30 * time.Second}).DialContext
	secure.TLSHandshakeTimeout = t.Connect
	insecure := secure.Clone()
	if insecure.TLSClientConfig == nil {
		insecure.TLSClientConfig = &tls.Config{}
	}
	insecure.TLSClientConfig.InsecureSkipVerify = true
	return &registryTransport{secure: secure, insecure: insecure, hosts: hosts, timeouts: t, limits: lim.withDefaults(), smallDigest: map[string]bool{}}
}

// small has the blob h fetched as a small request.
func (t *registryTransport) small(h v1.Hash) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.smallDigest[h.String()] = true
}

// kind says whether req downloads a blob, directly or by a redirect, and
// whether that blob is a small one.
func (t *registryTransport) kind(req *http.Request) (download, smallBlob bool) {
	for req.Response != nil && req.Response.Request != nil {
		req = req.Response.Request // the request that was redirected here
	}
	dir, last := path.Split(req.URL.Path)
	if req.Method != http.MethodGet || !strings.HasSuffix(dir, "/blobs/") {
		return false, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.smallDigest[last], t.smallDigest[last]
}

var (
	errStalled = errors.New("stalled")
	errSlow    = errors.New("too slow")
)

func (t *registryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.secure
	if t.hosts[req.URL.Host] {
		base = t.insecure
	} else if req.URL.Scheme != "https" {
		return nil, fmt.Errorf("plain HTTP to %s is not allowed: not an insecure registry", req.URL.Host)
	}
	what := req.Method + " " + req.URL.Redacted()
	download, smallBlob := t.kind(req)
	ctx, cancel := context.WithCancelCause(req.Context())
	var timer *time.Timer
	if download {
		timer = time.AfterFunc(t.timeouts.Idle, func() { cancel(errStalled) })
	} else {
		timer = time.AfterFunc(t.timeouts.Request, func() { cancel(errSlow) })
	}
	resp, err := base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		timer.Stop()
		err = t.why(ctx, what, err)
		cancel(nil)
		return nil, err
	}
	body := &guardedBody{body: resp.Body, ctx: ctx, cancel: cancel, timer: timer, what: what, t: t, max: -1}
	if download && resp.StatusCode/100 == 2 {
		timer.Stop() // from here, each read has Idle for its bytes
		body.idle = t.timeouts.Idle
	} else {
		// A manifest, an index, a token, an error, the config: small, or refused.
		body.max = t.limits.MaxManifestBytes
		if smallBlob {
			body.max = t.limits.MaxConfigBytes
		}
		if req.Method != http.MethodHead && resp.ContentLength > body.max {
			resp.Body.Close()
			timer.Stop()
			cancel(nil)
			return nil, errdefs.Errorf(errdefs.ErrLimit, "%s: %d bytes, limit %d", what, resp.ContentLength, body.max)
		}
	}
	resp.Body = body
	return resp, nil
}

// why explains an error of a request whose context ctx is: a timeout of
// ours becomes ErrTimeout.
func (t *registryTransport) why(ctx context.Context, what string, err error) error {
	switch context.Cause(ctx) {
	case errStalled:
		return fmt.Errorf("%s: no data for %s: %w", what, t.timeouts.Idle, errdefs.ErrTimeout)
	case errSlow:
		return fmt.Errorf("%s: no whole answer within %s: %w", what, t.timeouts.Request, errdefs.ErrTimeout)
	}
	return err
}

// guardedBody is a response body under the transport's timeouts and limits.
type guardedBody struct {
	body   io.ReadCloser
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
	idle   time.Duration // for downloads: the timer runs only while a read waits
	max    int64         // for the rest: bytes allowed, or -1
	n      int64
	what   string
	t      *registryTransport
}

func (b *guardedBody) Read(p []byte) (int, error) {
	if b.idle > 0 {
		b.timer.Reset(b.idle)
	}
	if b.max >= 0 && int64(len(p)) > b.max-b.n+1 {
		p = p[:b.max-b.n+1]
	}
	n, err := b.body.Read(p)
	if b.idle > 0 {
		b.timer.Stop()
	}
	b.n += int64(n)
	if b.max >= 0 && b.n > b.max {
		return 0, errdefs.Errorf(errdefs.ErrLimit, "%s: more than %d bytes", b.what, b.max)
	}
	if err != nil && err != io.EOF {
		err = b.t.why(b.ctx, b.what, err)
	}
	return n, err
}

func (b *guardedBody) Close() error {
	b.timer.Stop()
	err := b.body.Close()
	b.cancel(nil)
	return err
}

// close drops idle connections, which would otherwise outlive the pull.
func (t *registryTransport) close() {
	t.secure.CloseIdleConnections()
	t.insecure.CloseIdleConnections()
}
