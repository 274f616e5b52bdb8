//go:build !amd64 && !arm64

package jail

import "github.com/boxlite/boxlite/internal/seccomp"

const (
	seccompArch = 0 // no filter: the Seccomp layer is reported missing
	x32Bit      = 0
)

var denyENOSYS, denyEPERM, setxattrCalls []uint32

const sysMknod = 0

func setIDRules() []seccomp.ArgRule { return nil }
