// Package proc reads what tests and benchmarks need of other processes
// from /proc.
package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ChildrenNamed lists the child processes of pid whose command name is comm.
func ChildrenNamed(pid int, comm string) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var pids []int
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, p := range strings.Fields(string(b)) {
			c, _ := strconv.Atoi(p)
			if name, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c)); strings.TrimSpace(string(name)) == comm {
				pids = append(pids, c)
			}
		}
	}
	return pids
}
