//go:build linux && !amd64

package agent

import "github.com/boxlite/boxlite/internal/seccomp"

// boxSeccompPolicy has no table for this arch: the sandbox refuses to start
// rather than run boxes without the filter.
func boxSeccompPolicy() (seccomp.Policy, bool) { return seccomp.Policy{}, false }
