// Package layering holds the architecture's import rules (layers.txt) and
// the test that enforces them.
package layering
