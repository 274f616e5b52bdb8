package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/boxlite/boxlite/errdefs"
)

// PullOption configures a pull.
type PullOption func(*pullOptions)

type pullOptions struct {
	mirrors  Mirrors
	insecure []string
	keychain authn.Keychain
	progress func(Progress)
	timeouts Timeouts
}

// Timeouts bound how long a registry may keep a pull waiting, so that a
// stalled mirror is passed over for the next source rather than hanging the
// pull; a source that times out fails with ErrTimeout. A zero field takes its
// default (DefaultTimeouts). The context still stops everything at once.
type Timeouts struct {
	// Connect bounds opening a connection: TCP, then the TLS handshake.
	Connect time.Duration
	// Request bounds each small request, from sending it to the end of the
	// answer: the ping, tokens, manifests, indexes and the config.
	Request time.Duration
	// Idle bounds the wait for each next byte of a layer download (and for
	// its response headers), not the download: a big layer on a slow but
	// steady link takes as long as it takes.
	Idle time.Duration
}

// DefaultTimeouts: generous for a slow registry on the other side of the
// world (a manifest is one round trip and a few KiB; docker's own client
// waits 30 s for headers), short enough that a dead mirror costs one wait.
var DefaultTimeouts = Timeouts{Connect: 15 * time.Second, Request: 30 * time.Second, Idle: 30 * time.Second}

func (t Timeouts) withDefaults() Timeouts {
	if t.Connect <= 0 {
		t.Connect = DefaultTimeouts.Connect
	}
	if t.Request <= 0 {
		t.Request = DefaultTimeouts.Request
	}
	if t.Idle <= 0 {
		t.Idle = DefaultTimeouts.Idle
	}
	return t
}

// WithTimeouts sets the registry timeouts; zero fields keep their defaults.
func WithTimeouts(t Timeouts) PullOption {
	return func(o *pullOptions) { o.timeouts = t }
}

// WithMirrors sets the registry mirrors to try first. Default: none.
func WithMirrors(m Mirrors) PullOption {
	return func(o *pullOptions) { o.mirrors = m }
}

// WithInsecure lets Pull reach these registries ("host" or "host:port")
// over plain HTTP, or over TLS with any certificate. Default: none, not even
// localhost.
func WithInsecure(hosts ...string) PullOption {
	return func(o *pullOptions) { o.insecure = append(o.insecure, hosts...) }
}

// WithKeychain sets where credentials come from. Default:
// authn.DefaultKeychain, the docker config ($DOCKER_CONFIG or
// ~/.docker/config.json) and its credential helpers.
func WithKeychain(k authn.Keychain) PullOption {
	return func(o *pullOptions) { o.keychain = k }
}

// WithProgress has fn called as layers download. Calls never overlap, and
// come from the pulling goroutine(s): fn must be quick. Default: none.
func WithProgress(fn func(Progress)) PullOption {
	return func(o *pullOptions) { o.progress = fn }
}

// Progress is the state of one layer of a pull. Each layer is reported once
// with Done 0 (or, when Cached, Done == Total) as soon as the manifest is
// read, so the first reports give the whole size; then as bytes arrive; its
// last report has Done == Total. A pull that falls back to another source
// reports its layers again with the new Source.
type Progress struct {
	Ref    string // what is pulled, canonical ("docker.io/library/python:slim")
	Source string // who serves it: a mirror's URL as configured, or the registry
	Layer  string // digest of the layer blob
	Done   int64  // bytes of it downloaded (or found in the store)
	Total  int64  // its size, from the manifest
	Cached bool   // it was in the store: not downloaded
}

// Tracker keeps the last Progress of each layer, for callers that poll
// rather than take callbacks (the C ABI): pass its Update to WithProgress
// and call Snapshot from any goroutine.
type Tracker struct {
	mu     sync.Mutex
	layers []Progress
}

// Update records p; it is the func to give WithProgress.
func (t *Tracker) Update(p Progress) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.layers {
		if t.layers[i].Layer == p.Layer {
			t.layers[i] = p
			return
		}
	}
	t.layers = append(t.layers, p)
}

// Snapshot returns the layers in the order first reported, and the sums of
// their Done and Total.
func (t *Tracker) Snapshot() (layers []Progress, done, total int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range t.layers {
		done += l.Done
		total += l.Total
	}
	return append([]Progress(nil), t.layers...), done, total
}

// PullResult says what Pull brought and from where.
type PullResult struct {
	Image              // the image, under the pulled name
	Source     string  // who served it: a mirror's URL as configured, or the registry ("docker.io")
	Downloaded int64   // bytes of layers fetched; layers the store had are not
	Failed     []error // the mirrors tried before Source, each with why it failed
}

// Pull fetches the image ref from its registry into the store and names it
// ref: a tag ("python:slim" is docker.io/library/python:slim) or, for a
// digest ("python@sha256:…"), the canonical digest reference, so that the
// same reference finds it later without the registry. From an index it takes
// the linux/GOARCH image. It tries the registry's mirrors first, in order,
// then the registry, and takes the first source that serves the image whole.
//
// Blobs go through the same staging as Load: each is checked against its
// digest and moved into the store only when all are there, so a failed or
// cancelled pull leaves nothing. Layers the store has are not downloaded.
// Errors: ErrInvalidArgument for a malformed reference (or mirror), ErrNotFound
// when the repository, tag or digest does not exist or needs credentials the
// keychain lacks, ErrLimit when the registry rate-limits or the image
// exceeds the store's Limits, ErrTimeout (see Timeouts), and
// ErrInvalidArgument naming the digest when content does not match it.
func (s *Store) Pull(ctx context.Context, ref string, opts ...PullOption) (PullResult, error) {
	res, err := s.pull(ctx, ref, opts)
	if err != nil {
		return PullResult{}, fmt.Errorf("image pull %q: %w", ref, err)
	}
	return res, nil
}

// pullSource is one place to pull from.
type pullSource struct {
	label  string // what PullResult.Source says
	ref    name.Reference
	mirror bool
}

func (s *Store) pull(ctx context.Context, ref string, opts []PullOption) (PullResult, error) {
	o := pullOptions{keychain: authn.DefaultKeychain}
	for _, opt := range opts {
		opt(&o)
	}
	mirrors, err := o.mirrors.resolve()
	if err != nil {
		return PullResult{}, err
	}
	if strings.HasPrefix(ref, "sha256:") {
		return PullResult{}, fmt.Errorf("a digest alone names no repository, want NAME@sha256:…: %w", errdefs.ErrInvalidArgument)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return PullResult{}, fmt.Errorf("invalid image reference: %w", errdefs.ErrInvalidArgument)
	}
	insecure := map[string]bool{}
	for _, h := range o.insecure {
		if reg, err := name.NewRegistry(h); err == nil {
			insecure[reg.RegistryStr()] = true // "docker.io" is index.docker.io, in URLs too
		}
	}
	if insecure[r.Context().RegistryStr()] {
		r, _ = name.ParseReference(ref, name.Insecure) // lets go-containerregistry try http
	}
	var srcs []pullSource
	for _, mr := range mirrors[r.Context().RegistryStr()] {
		if mr.plain {
			insecure[mr.reg.RegistryStr()] = true
		}
		srcs = append(srcs, pullSource{label: mr.url, ref: mr.ref(r), mirror: true})
	}
	srcs = append(srcs, pullSource{label: dockerIO(r.Context().RegistryStr()), ref: r})
	var refName string
	if d, ok := r.(name.Digest); ok {
		refName = canonicalDigest(d)
	} else if refName, err = canonical(ref); err != nil {
		return PullResult{}, err
	}

	tr := newRegistryTransport(insecure, o.timeouts.withDefaults(), s.limits)
	defer tr.close()
	stage, done, err := s.newStage(ctx, "pull-")
	if err != nil {
		return PullResult{}, err
	}
	defer done()
	var failed []error
	var counts layerCounts // of the layers staged, by whichever source
	for _, src := range srcs {
		res, err := s.pullFrom(ctx, stage, src, tr, refName, o, &counts)
		if err == nil {
			res.Source, res.Failed = src.label, failed
			return res, nil
		}
		if ctx.Err() != nil {
			return PullResult{}, ctxErr(ctx)
		}
		if src.mirror {
			failed = append(failed, fmt.Errorf("mirror %s: %w", src.label, err))
			continue
		}
		if len(failed) > 0 {
			// The registry's error decides the kind; the mirrors' say why they were passed over.
			why := make([]string, len(failed))
			for i, e := range failed {
				why[i] = e.Error()
			}
			err = fmt.Errorf("%w (after: %s)", err, strings.Join(why, "; "))
		}
		return PullResult{}, err
	}
	return PullResult{}, nil // not reached: the registry is the last source, and returns
}

// pullFrom pulls from one source into stage (which may hold blobs that an
// earlier source delivered before failing) and commits the image.
func (s *Store) pullFrom(ctx context.Context, stage string, src pullSource, tr *registryTransport, refName string, o pullOptions, counts *layerCounts) (PullResult, error) {
	ctx, cancel := context.WithCancel(ctx) // stops the other downloads when one fails
	defer cancel()
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithTransport(tr),
		remote.WithAuthFromKeychain(o.keychain), remote.WithUserAgent("boxlite")}
	if src.mirror {
		// A failing mirror is passed over at once rather than retried for seconds.
		ropts = append(ropts, remote.WithRetryBackoff(remote.Backoff{Steps: 1}))
	}
	desc, err := remote.Get(src.ref, ropts...)
	if err != nil {
		return PullResult{}, remoteError(err)
	}
	img, err := platformOf(desc, s.limits)
	if err != nil {
		return PullResult{}, err
	}
	m, err := img.Manifest()
	if err == nil {
		err = checkManifest(m)
	}
	var h v1.Hash
	if err == nil {
		h, err = img.Digest()
	}
	if err != nil {
		return PullResult{}, remoteError(err)
	}
	label := "image " + h.String()
	if err := s.limits.checkDeclared(label, m); err != nil {
		return PullResult{}, err
	}
	tr.small(m.Config.Digest)
	cf, err := img.ConfigFile() // fetched here, so that a network failure is not taken for bad content
	if err != nil {
		return PullResult{}, remoteError(err)
	}
	if (cf.OS != "" && cf.OS != "linux") || (cf.Architecture != "" && cf.Architecture != runtime.GOARCH) {
		// The guest could not run its programs; the registry may have the right one under another name.
		return PullResult{}, fmt.Errorf("image is %s/%s, not linux/%s: %w", cf.OS, cf.Architecture, runtime.GOARCH, errdefs.ErrUnsupported)
	}

	rep := &reporter{fn: o.progress, base: Progress{Ref: refName, Source: src.label}}
	b := newBudget(label, s.limits)
	downloaded, err := s.fetchLayers(ctx, cancel, stage, img, m.Layers, rep, b, counts)
	if err != nil {
		return PullResult{}, err
	}
	d, blobs, err := s.ingest(ctx, stage, source{img: img, asIs: true}, counts)
	if err != nil {
		return PullResult{}, err
	}
	imgs, err := s.commit(stage, blobs, []v1.Descriptor{d}, [][]string{{refName}})
	if err != nil {
		return PullResult{}, err
	}
	return PullResult{Image: imgs[0], Downloaded: downloaded}, nil
}

// platformOf returns the image that desc is, or its linux/GOARCH image when
// desc is an index.
// The transport bounds what a registry sends for a manifest; a child's size
// as the index declares it is checked too.
func platformOf(desc *remote.Descriptor, lim Limits) (v1.Image, error) {
	switch desc.MediaType {
	case types.OCIImageIndex, types.DockerManifestList:
		ii, err := desc.ImageIndex()
		if err != nil {
			return nil, remoteError(err)
		}
		img, err := platformChild(ii, func(d v1.Descriptor) error {
			if d.Size > lim.MaxManifestBytes {
				return limitErr("manifest "+d.Digest.String(), "", d.Size, lim.MaxManifestBytes)
			}
			return nil
		})
		if err != nil {
			return nil, remoteError(err)
		}
		if img == nil {
			return nil, fmt.Errorf("index %s has no linux/%s image: %w", desc.Digest, runtime.GOARCH, errdefs.ErrNotFound)
		}
		return img, nil
	case types.OCIManifestSchema1, types.DockerManifestSchema2:
		img, err := desc.Image()
		if err != nil {
			return nil, remoteError(err)
		}
		return img, nil
	}
	return nil, fmt.Errorf("%s is a %s, not an image: %w", desc.Digest, desc.MediaType, errdefs.ErrUnsupported)
}

// checkManifest refuses layers that a pull cannot fetch or the guest cannot use.
func checkManifest(m *v1.Manifest) error {
	for _, l := range m.Layers {
		if len(l.URLs) > 0 || !l.MediaType.IsLayer() {
			return fmt.Errorf("layer %s: media type %s: %w", l.Digest, l.MediaType, errdefs.ErrUnsupported)
		}
	}
	return nil
}

// fetchLayers downloads into stage the layers the store lacks, three at a
// time (as docker does), and returns the bytes downloaded.
// Each is read through the limits as it arrives, charging b; the layers
// staged already are charged their size in counts.
func (s *Store) fetchLayers(ctx context.Context, cancel func(), stage string, img v1.Image, layers []v1.Descriptor, rep *reporter, b *budget, counts *layerCounts) (int64, error) {
	staged := filepath.Join(stage, "blobs", "sha256")
	var todo []v1.Descriptor
	seen := map[v1.Hash]bool{}
	for _, l := range layers {
		if seen[l.Digest] {
			continue
		}
		seen[l.Digest] = true
		if n, ok := s.stageExisting(staged, l.Digest); ok {
			if err := b.add(join(b.image, "layer "+l.Digest.String()), counts.get(l.Digest)); err != nil {
				return 0, err
			}
			rep.report(l.Digest, n, l.Size, true)
		} else {
			rep.report(l.Digest, 0, l.Size, false)
			todo = append(todo, l)
		}
	}
	var (
		downloaded atomic.Int64
		wg         sync.WaitGroup
		mu         sync.Mutex
		firstErr   error
		slots      = make(chan struct{}, 3)
	)
	for _, l := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			check := walkLayer(s.limits, b, counts, l)
			n, err := fetchBlob(ctx, staged, img, l, check, func(done int64) { rep.report(l.Digest, done, l.Size, false) })
			downloaded.Add(n)
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				cancel()
			}
		}()
	}
	wg.Wait()
	return downloaded.Load(), firstErr
}

// fetchBlob downloads the layer l of img into dir, checked against its digest.
func fetchBlob(ctx context.Context, dir string, img v1.Image, l v1.Descriptor, check func(io.Reader) error, progress func(int64)) (int64, error) {
	if ctx.Err() != nil {
		return 0, ctxErr(ctx)
	}
	layer, err := img.LayerByDigest(l.Digest)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", l.Digest, remoteError(err))
	}
	rc, err := layer.Compressed()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", l.Digest, remoteError(err))
	}
	defer rc.Close()
	return writeBlobChecked(ctx, dir, l.Digest, l.Size, &countingReader{r: rc, progress: progress}, check)
}

// countingReader reports the bytes read so far, and gives network errors a kind.
type countingReader struct {
	r        io.Reader
	n        int64
	progress func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.n += int64(n)
		c.progress(c.n)
	}
	if err != nil && err != io.EOF {
		err = remoteError(err)
	}
	return n, err
}

// reporter serialises progress reports.
type reporter struct {
	mu   sync.Mutex
	fn   func(Progress)
	base Progress
}

func (r *reporter) report(layer v1.Hash, done, total int64, cached bool) {
	if r.fn == nil {
		return
	}
	p := r.base
	p.Layer, p.Done, p.Total, p.Cached = layer.String(), done, total, cached
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fn(p)
}

// remoteError gives an error from go-containerregistry its kind. Errors it
// cannot place (a checksum mismatch, for one) are left without a kind, for
// the caller to call bad content.
func remoteError(err error) error {
	var te *transport.Error
	var ne net.Error
	switch {
	case errdefs.KindOf(err) != errdefs.KindInternal || errors.Is(err, errdefs.ErrInternal):
		return err
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", err, errdefs.ErrTimeout)
	case errors.Is(err, context.Canceled):
		return err
	case errors.As(err, &te):
		switch {
		case te.StatusCode == http.StatusNotFound || hasCode(te, transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode):
			return fmt.Errorf("%w: %w", err, errdefs.ErrNotFound)
		case te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden || hasCode(te, transport.UnauthorizedErrorCode, transport.DeniedErrorCode):
			// As docker says: registries answer so for repositories that do not exist, too.
			return fmt.Errorf("%w (the repository does not exist, or needs credentials: docker login): %w", err, errdefs.ErrNotFound)
		case te.StatusCode == http.StatusTooManyRequests || hasCode(te, transport.TooManyRequestsErrorCode):
			return fmt.Errorf("%w: %w", err, errdefs.ErrLimit)
		}
		return fmt.Errorf("registry error: %w: %w", err, errdefs.ErrInternal)
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Errorf("%w: the registry speaks plain HTTP, which is used only for insecure registries (BOXLITE_INSECURE_REGISTRIES) and http:// mirrors: %w", err, errdefs.ErrInvalidArgument)
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%w: %w", err, errdefs.ErrTimeout)
	case errors.As(err, &ne), errors.Is(err, io.ErrUnexpectedEOF): // *url.Error is a net.Error: any failed request
		return fmt.Errorf("%w: %w", err, errdefs.ErrUnreachable)
	}
	return err
}

func hasCode(te *transport.Error, codes ...transport.ErrorCode) bool {
	for _, d := range te.Errors {
		for _, c := range codes {
			if d.Code == c {
				return true
			}
		}
	}
	return false
}
