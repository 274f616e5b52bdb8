package restapi

import (
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite/errdefs"
)

// TestIdempotencyStore: a key's answer is replayed to the same request,
// refused to another, kept across a reopen (a restart of the server),
// dropped after a 5xx and after its lifetime; names on disk are hashes.
func TestIdempotencyStore(t *testing.T) {
	dir := t.TempDir()
	s, err := openIdemStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	answer := func(caller, key, fp string, status int, body string) {
		t.Helper()
		kept, err := s.begin(caller, key, fp)
		if err != nil || kept != nil {
			t.Fatalf("begin %s/%s: %v %v", caller, key, kept, err)
		}
		rec := &idemRecorder{ResponseWriter: httptest.NewRecorder()}
		rec.Header().Set("Location", "/v1/boxes/b1")
		rec.WriteHeader(status)
		rec.Write([]byte(body))
		s.finish(caller, key, rec)
	}
	answer("ci", "../../k1", "fp1", 201, `{"box_id":"b1"}`)
	if _, err := s.begin("ci", "../../k1", "fp2"); answerFor(err).Status != 422 {
		t.Fatalf("same key, other request: %v", err)
	}
	if kept, err := s.begin("other", "../../k1", "fp1"); err != nil || kept != nil {
		t.Fatalf("another caller's key is its own: %v %v", kept, err)
	}
	if _, err := s.begin("other", "../../k1", "fp1"); !errors.Is(err, errdefs.ErrInvalidState) {
		t.Fatalf("a key whose request still runs: %v", err)
	}
	answer("ci", "k5xx", "fp", 503, "down")

	s, err = openIdemStore(dir) // the server restarts
	if err != nil {
		t.Fatal(err)
	}
	kept, err := s.begin("ci", "../../k1", "fp1")
	if err != nil || kept == nil || kept.Status != 201 || string(kept.Body) != `{"box_id":"b1"}` || kept.Location != "/v1/boxes/b1" {
		t.Fatalf("after a restart: %+v %v", kept, err)
	}
	if kept, err := s.begin("ci", "k5xx", "fp"); err != nil || kept != nil {
		t.Fatalf("a 5xx is not kept: %+v %v", kept, err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "idempotency", "*"))
	for _, n := range names {
		if b := filepath.Base(n); len(b) != 64 || strings.Trim(b, "0123456789abcdef") != "" {
			t.Errorf("file %q is not a hash", b)
		}
	}
	old := time.Now().Add(-IdempotencyLifetime - time.Minute)
	for _, a := range s.m {
		a.At = old
	}
	if kept, err := s.begin("ci", "../../k1", "fp1"); err != nil || kept != nil {
		t.Fatalf("an expired answer is not replayed: %+v %v", kept, err)
	}
	if err := checkIdemKey(strings.Repeat("k", 256)); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("256-character key: %v", err)
	}
	if err := checkIdemKey("a b"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("key with a space: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "idempotency")); err != nil {
		t.Fatal(err)
	}
}
