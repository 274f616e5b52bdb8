package boxlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/boxlite/boxlite"
)

// Run a command in a new box. The image comes from a docker archive on disk
// here (BOXLITE_TEST_IMAGE, the busybox-based alpine:latest that `make test`
// builds); Runtime.Pull fetches one from a registry instead.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rt, err := boxlite.NewRuntime() // $BOXLITE_HOME, else ~/.boxlite
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close() // stops the boxes this process started
	if _, err := rt.Images().Load(ctx, os.Getenv("BOXLITE_TEST_IMAGE")); err != nil {
		fmt.Println(err)
		return
	}
	box, err := rt.Create(ctx, "alpine:latest", boxlite.WithMemoryMiB(256), boxlite.WithAutoRemove(true))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer box.Stop(ctx) // auto-remove: the box goes with it
	res, err := box.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c", "echo hello from $(uname -s)"}, Timeout: time.Minute})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%sexit %d\n", res.Stdout, res.Code)
	// Output:
	// hello from Linux
	// exit 0
}

// A Python session keeps its state between cells, as a notebook does; a
// cell's last expression comes back as its value.
func ExampleBox_NewPythonSession() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rt, err := boxlite.NewRuntime()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	if _, err := rt.Images().Load(ctx, os.Getenv("BOXLITE_TEST_PYTHON_IMAGE")); err != nil {
		fmt.Println(err)
		return
	}
	box, err := rt.Create(ctx, "python:slim", boxlite.WithAutoRemove(true))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer box.Stop(ctx)
	s, err := box.NewPythonSession(ctx, boxlite.SessionOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	for _, cell := range []string{"import math\nr = 2", "print('area', round(math.pi * r * r, 2))\nr * 21"} {
		res, err := s.Run(ctx, cell, time.Minute)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Print(string(res.Stdout))
		if res.Value != nil {
			fmt.Println("value", *res.Value)
		}
	}
	// Output:
	// area 12.57
	// value 42
}

// Files go in and out as with docker cp.
func ExampleBox_CopyOut() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rt, err := boxlite.NewRuntime()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	if _, err := rt.Images().Load(ctx, os.Getenv("BOXLITE_TEST_IMAGE")); err != nil {
		fmt.Println(err)
		return
	}
	box, err := rt.Create(ctx, "alpine:latest", boxlite.WithMemoryMiB(256), boxlite.WithAutoRemove(true))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer box.Stop(ctx)
	dir, err := os.MkdirTemp("", "boxlite-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	in := filepath.Join(dir, "words.txt")
	if err := os.WriteFile(in, []byte("sandboxes\nare\nfun\n"), 0o644); err != nil {
		fmt.Println(err)
		return
	}
	steps := []func() error{
		func() error { return box.CopyIn(ctx, in, "/tmp/", boxlite.CopyOptions{}) },
		func() error {
			_, err := box.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c", "sort /tmp/words.txt | tr a-z A-Z > /tmp/sorted.txt"}})
			return err
		},
		func() error {
			return box.CopyOut(ctx, "/tmp/sorted.txt", filepath.Join(dir, "sorted.txt"), boxlite.CopyOptions{})
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			fmt.Println(err)
			return
		}
	}
	out, err := os.ReadFile(filepath.Join(dir, "sorted.txt"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.Fields(string(out)))
	// Output: [ARE FUN SANDBOXES]
}
