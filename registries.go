package boxlite

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/image"
)

// ImageRegistry is how pulls reach one registry (BoxLite 0.10's
// ImageRegistry): over HTTPS (Transport "https", the default) or plain HTTP
// ("http", for a registry on loopback), checking its certificate unless
// SkipVerify, with basic credentials (Username, Password) or a bearer token;
// Search puts it in the list of registries an unqualified image name
// ("alpine", "library/python:slim") is looked up in, in order, instead of
// docker.io; Mirrors (ours, as WithRegistryMirrors) are tried before it.
// Credentials are only ever sent to Host: never logged, never in info, and
// String leaves them out.
type ImageRegistry struct {
	Host        string
	Transport   string
	SkipVerify  bool
	Search      bool
	Username    string
	Password    string
	BearerToken string
	Mirrors     []string
}

// String is r without its credentials.
func (r ImageRegistry) String() string {
	auth := "none"
	switch {
	case r.BearerToken != "":
		auth = "bearer token"
	case r.Username != "":
		auth = "user " + r.Username
	}
	return fmt.Sprintf("ImageRegistry{host %s, transport %s, skip_verify %v, search %v, auth %s}", r.Host, firstNonEmpty(r.Transport, "https"), r.SkipVerify, r.Search, auth)
}

// GoString keeps %#v from printing the credentials.
func (r ImageRegistry) GoString() string { return r.String() }

// registryName is r's host as go-containerregistry names it ("docker.io" is
// "index.docker.io").
func (r ImageRegistry) registryName() (string, error) {
	reg, err := name.NewRegistry(r.Host, name.StrictValidation)
	if err != nil || r.Host == "" || strings.ContainsAny(r.Host, "/ ") {
		return "", errdefs.Errorf(errdefs.ErrInvalidArgument, "image registry: host %q: want host or host:port", r.Host)
	}
	return reg.RegistryStr(), nil
}

func (r ImageRegistry) check() error {
	if _, err := r.registryName(); err != nil {
		return err
	}
	bad := func(format string, args ...any) error {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "image registry %s: "+format, append([]any{r.Host}, args...)...)
	}
	switch {
	case r.Transport != "" && r.Transport != "https" && r.Transport != "http":
		return bad("transport %q: want https or http", r.Transport)
	case r.BearerToken != "" && (r.Username != "" || r.Password != ""):
		return bad("give a bearer token or a username and password, not both")
	case (r.Username == "") != (r.Password == ""):
		return bad("a username needs a password and a password a username")
	case strings.ContainsAny(r.Username+r.Password+r.BearerToken, "\x00\r\n"):
		return bad("credentials with a line break or NUL")
	}
	return nil
}

// WithImageRegistries configures the registries pulls use (see
// ImageRegistry). A host may appear once. They add to the environment's
// insecure registries and mirrors, and their credentials come before the
// docker config's (or WithRegistryKeychain's) for their hosts.
func WithImageRegistries(regs ...ImageRegistry) Option {
	return func(o *runtimeOptions) error {
		seen := map[string]bool{}
		for _, r := range regs {
			if err := r.check(); err != nil {
				return err
			}
			n, _ := r.registryName()
			if seen[n] {
				return errdefs.Errorf(errdefs.ErrInvalidArgument, "image registry %s is given twice", r.Host)
			}
			seen[n] = true
			if _, err := image.ParseMirrors(mirrorSpec(r)); err != nil {
				return err
			}
			r.Mirrors = append([]string(nil), r.Mirrors...)
			o.registries = append(o.registries, r)
		}
		return nil
	}
}

func mirrorSpec(r ImageRegistry) string {
	var s []string
	for _, m := range r.Mirrors {
		s = append(s, r.Host+"="+m)
	}
	return strings.Join(s, ",")
}

// registryPullOptions adds the registries' settings to the pull options.
func (o *runtimeOptions) registryPullOptions(mirrors image.Mirrors, insecure []string, keychain authn.Keychain) (image.Mirrors, []string, authn.Keychain, error) {
	if len(o.registries) == 0 {
		return mirrors, insecure, keychain, nil
	}
	m := image.Mirrors{}
	for k, v := range mirrors {
		m[k] = append([]string(nil), v...)
	}
	for _, r := range o.registries {
		if r.Transport == "http" || r.SkipVerify {
			insecure = append(insecure, r.Host)
		}
		more, err := image.ParseMirrors(mirrorSpec(r))
		if err != nil {
			return nil, nil, nil, err
		}
		for k, v := range more {
			m[k] = append(m[k], v...)
		}
	}
	if keychain == nil {
		keychain = authn.DefaultKeychain
	}
	return m, insecure, registryKeychain{regs: o.registries, next: keychain}, nil
}

// searchRegistries are the hosts unqualified names are looked up in.
func (o *runtimeOptions) searchRegistries() []string {
	var hosts []string
	for _, r := range o.registries {
		if r.Search {
			hosts = append(hosts, r.Host)
		}
	}
	return hosts
}

// registryKeychain gives the configured registries' credentials, and asks
// next for other hosts.
type registryKeychain struct {
	regs []ImageRegistry
	next authn.Keychain
}

func (k registryKeychain) Resolve(res authn.Resource) (authn.Authenticator, error) {
	for _, r := range k.regs {
		n, err := r.registryName()
		if err != nil || n != res.RegistryStr() {
			continue
		}
		switch {
		case r.BearerToken != "":
			return authn.FromConfig(authn.AuthConfig{RegistryToken: r.BearerToken}), nil
		case r.Username != "":
			return authn.FromConfig(authn.AuthConfig{Username: r.Username, Password: r.Password}), nil
		}
	}
	return k.next.Resolve(res)
}

// unqualified reports whether ref names no registry: its first path
// component has no '.' or ':' and is not "localhost" (docker's rule).
func unqualified(ref string) bool {
	first, _, ok := strings.Cut(ref, "/")
	if !ok {
		return !strings.HasPrefix(ref, "sha256:")
	}
	return !strings.ContainsAny(first, ".:") && first != "localhost"
}

// findImage is the store's image ref; an unqualified ref, with search
// registries, is looked up under each of them first (where pullSearch puts
// what it pulls).
func (r *Runtime) findImage(ref string) (image.Image, error) {
	if len(r.search) > 0 && unqualified(ref) {
		for _, host := range r.search {
			if img, err := r.images.Get(host + "/" + ref); err == nil {
				return img, nil
			}
		}
	}
	return r.images.Get(ref)
}

// pullSearch pulls an unqualified ref from the search registries in order:
// the first that has it wins; a registry that lacks it (ErrNotFound) or does
// not answer (ErrUnreachable, ErrTimeout) passes to the next. It reports
// whether it applied (no search registries, or a qualified ref: not).
func (r *Runtime) pullSearch(ctx context.Context, ref string, opts []image.PullOption) (image.PullResult, bool, error) {
	if len(r.search) == 0 || !unqualified(ref) {
		return image.PullResult{}, false, nil
	}
	var errs []error
	for _, host := range r.search {
		res, err := r.images.Pull(ctx, host+"/"+ref, opts...)
		if err == nil {
			return res, true, nil
		}
		errs = append(errs, err)
		if !errors.Is(err, errdefs.ErrNotFound) && !errors.Is(err, errdefs.ErrUnreachable) && !errors.Is(err, errdefs.ErrTimeout) {
			break
		}
	}
	return image.PullResult{}, true, fmt.Errorf("image %q from the search registries (%s): %w", ref, strings.Join(r.search, ", "), errors.Join(errs...))
}
