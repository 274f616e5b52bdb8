package jail

import "golang.org/x/sys/unix"

// NoOpenTree makes Start take the non-root way for binds from a
// descriptor (the stage opens the path again and compares); the returned
// func restores open_tree.
func NoOpenTree() (restore func()) {
	openTree = func(int, string, uint) (int, error) { return -1, unix.ENOSYS }
	return func() { openTree = unix.OpenTree }
}
