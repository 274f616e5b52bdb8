package boxtest

import (
	"io"
	"log"
	"net/http/httptest"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// NewRegistry serves go-containerregistry's in-process registry over plain
// HTTP on 127.0.0.1 (its host:port is the URL's); the caller closes it.
func NewRegistry() *httptest.Server {
	return httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
}

// PushImage pushes the docker archive at archive to host/repoTag (plain
// HTTP) and returns its digest.
func PushImage(archive, host, repoTag string) (string, error) {
	img, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		return "", err
	}
	ref, err := name.ParseReference(host+"/"+repoTag, name.Insecure)
	if err != nil {
		return "", err
	}
	if err := remote.Write(ref, img); err != nil {
		return "", err
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}
