// Package shimapi is the contract between the boxlite runtime and a box's
// shim: the config the runtime hands over, the ready line the shim answers
// with, the exit record it leaves, and the files of a box directory that both
// sides name. It imports nothing of either side (containerd keeps its shim API
// apart from the shim in the same way).
package shimapi
