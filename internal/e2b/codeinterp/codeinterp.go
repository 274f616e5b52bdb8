// Package codeinterp is E2B's code interpreter (port 49999 of a sandbox).
// This is a placeholder that answers 501; the code interpreter replaces it
// with the same API.
package codeinterp

import (
	"net/http"

	"github.com/boxlite/boxlite"
)

// Interp serves the code interpreter of one box.
type Interp struct{}

// New makes the interpreter of b.
func New(b *boxlite.Box) *Interp { return &Interp{} }

// ServeHTTP answers 501.
func (i *Interp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotImplemented)
	w.Write([]byte(`{"code":501,"message":"the code interpreter is not built into this server yet"}`))
}

// Close ends its sessions.
func (i *Interp) Close() {}
