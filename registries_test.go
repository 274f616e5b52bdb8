package boxlite

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/boxlite/boxlite/errdefs"
)

// authRegistry is a registry on loopback (go-containerregistry's, plain
// HTTP) that wants basic auth user:pass, or the bearer token when given; it
// counts the requests that came with the right credentials.
func authRegistry(t *testing.T, user, pass, token string) (host string, authed *atomic.Int64) {
	t.Helper()
	authed = new(atomic.Int64)
	reg := registry.New(registry.Logger(log.New(ioDiscard{}, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		good := ok && u == user && p == pass
		if token != "" {
			good = r.Header.Get("Authorization") == "Bearer "+token
		}
		if !good {
			w.Header().Set("WWW-Authenticate", `Basic realm="boxlite-test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		authed.Add(1)
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), authed
}

type ioDiscard struct{}

func (ioDiscard) Write(p []byte) (int, error) { return len(p), nil }

func pushRandom(t *testing.T, ref string, auth authn.Authenticator) string {
	t.Helper()
	img, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, remote.WithAuth(auth)); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	return d.String()
}

// TestImageRegistries: a pull from a registry on loopback that needs basic
// auth fails without credentials (not_found, as docker reports it, saying
// credentials) and works with them; a bearer token; an unqualified name
// found in a search registry; the credentials never in errors or String.
func TestImageRegistries(t *testing.T) {
	ctx := context.Background()
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no docker config credentials
	t.Setenv("BOXLITE_INSECURE_REGISTRIES", "")
	t.Setenv("BOXLITE_REGISTRY_MIRRORS", "")
	const user, pass = "alice", "pa55-Word-that-must-not-leak"
	host, authed := authRegistry(t, user, pass, "")
	digest := pushRandom(t, host+"/team/app:1", &authn.Basic{Username: user, Password: pass})

	open := func(regs ...ImageRegistry) *Runtime {
		t.Helper()
		r, err := NewRuntime(WithHome(t.TempDir()), WithAssets(t.TempDir()), WithImageRegistries(regs...))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}

	// Plain HTTP, no credentials: refused, typed, and the store untouched.
	r := open(ImageRegistry{Host: host, Transport: "http"})
	before := authed.Load()
	_, err := r.Pull(ctx, host+"/team/app:1")
	if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "credentials") {
		t.Fatalf("without credentials: %v", err)
	}
	if authed.Load() != before {
		t.Errorf("a request without credentials got through")
	}
	if imgs, _ := r.Images().List(); len(imgs) != 0 {
		t.Errorf("a failed pull stored %v", imgs)
	}
	// Wrong password: the same, and the password is nowhere in the error.
	r = open(ImageRegistry{Host: host, Transport: "http", Username: user, Password: "wrong-" + pass})
	if _, err = r.Pull(ctx, host+"/team/app:1"); !errors.Is(err, errdefs.ErrNotFound) || strings.Contains(err.Error(), pass) {
		t.Fatalf("wrong password: %v", err)
	}

	// With them: pulled.
	good := ImageRegistry{Host: host, Transport: "http", Username: user, Password: pass, Search: true}
	r = open(good)
	res, err := r.Pull(ctx, host+"/team/app:1")
	if err != nil || res.Digest != digest {
		t.Fatalf("with credentials: %+v, %v", res, err)
	}
	// An unqualified name is looked up in the search registry.
	res, err = r.Pull(ctx, "team/app:1")
	if err != nil || res.Digest != digest || !strings.HasPrefix(res.Name, host+"/") {
		t.Fatalf("search: %+v, %v", res, err)
	}
	if img, err := r.findImage("team/app:1"); err != nil || img.Digest != digest {
		t.Errorf("findImage after a search pull: %+v, %v", img, err)
	}
	if _, err := r.Pull(ctx, "team/missing:1"); !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "search registries") {
		t.Errorf("search miss: %v", err)
	}
	for _, s := range []string{good.String(), fmt.Sprintf("%v %+v %#v %s", good, good, good, good)} {
		if strings.Contains(s, pass) {
			t.Errorf("credentials printed: %s", s)
		}
	}

	// A bearer token.
	thost, _ := authRegistry(t, "", "", "tok-123")
	tdigest := pushRandom(t, thost+"/x/y:2", authn.FromConfig(authn.AuthConfig{RegistryToken: "tok-123"}))
	r = open(ImageRegistry{Host: thost, Transport: "http", BearerToken: "tok-123"})
	if res, err := r.Pull(ctx, thost+"/x/y:2"); err != nil || res.Digest != tdigest {
		t.Fatalf("bearer token: %+v, %v", res, err)
	}

	// Bad registries are refused at open, naming what is wrong.
	for _, c := range []struct {
		reg  ImageRegistry
		want string
	}{
		{ImageRegistry{Host: ""}, "host"},
		{ImageRegistry{Host: "a b"}, "host"},
		{ImageRegistry{Host: host, Transport: "ftp"}, "transport"},
		{ImageRegistry{Host: host, Username: "u"}, "password"},
		{ImageRegistry{Host: host, Password: "p"}, "username"},
		{ImageRegistry{Host: host, Username: "u", Password: "p", BearerToken: "t"}, "bearer"},
		{ImageRegistry{Host: host, Mirrors: []string{"ftp://x"}}, "mirror"},
	} {
		_, err := NewRuntime(WithHome(t.TempDir()), WithAssets(t.TempDir()), WithImageRegistries(c.reg))
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want invalid_argument naming %s", c.reg, err, c.want)
		}
	}
	if _, err := NewRuntime(WithHome(t.TempDir()), WithAssets(t.TempDir()), WithImageRegistries(ImageRegistry{Host: host}, ImageRegistry{Host: host})); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a host twice: %v", err)
	}
}
