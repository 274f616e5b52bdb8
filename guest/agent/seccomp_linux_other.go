//go:build linux && !amd64

package agent

// boxSeccompPolicy has no table for this arch: the sandbox refuses to start
// rather than run boxes without the filter.
func boxSeccompPolicy() (seccompPolicy, bool) { return seccompPolicy{}, false }
