//go:build !amd64

package hv

func measureTSCkHz() (int, bool) { return 0, false }
