// Package envd holds envd's Connect services as E2B's SDKs speak them: the
// .proto files (written to match E2B's envd protos: same packages,
// services, messages and field numbers, so the same URL paths and wire) and
// the Go code generated from them, committed. Regenerate with
// `go generate ./internal/e2b/envd`; TestGeneratedCodeIsFresh fails when
// the committed code is not what the protos generate.
package envd

//go:generate go run github.com/bufbuild/buf/cmd/buf@v1.75.0 generate
