//go:build !amd64 && !arm64

package jail

const (
	seccompArch = 0 // no filter: the Seccomp layer is reported missing
	x32Bit      = 0
)

var denyENOSYS, denyEPERM []uint32
