package main

import (
	"fmt"
	"sync"

	"github.com/boxlite/boxlite/errdefs"
)

// handles maps ids to live objects. Ids are never reused, so a freed id stays
// invalid forever.
var handles = struct {
	sync.Mutex
	next uintptr
	m    map[uintptr]any
}{next: 1, m: map[uintptr]any{}}

func newHandle(v any) uintptr {
	handles.Lock()
	defer handles.Unlock()
	id := handles.next
	handles.next++
	handles.m[id] = v
	return id
}

// lookup returns the object behind id if it is a T.
func lookup[T any](id uintptr, kind string) (T, error) {
	var zero T
	if id == 0 {
		return zero, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s handle is NULL", kind)
	}
	handles.Lock()
	v, ok := handles.m[id]
	handles.Unlock()
	t, isT := v.(T)
	if !ok || !isT {
		return zero, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s handle %#x is not valid (freed, or not a %s)", kind, id, kind)
	}
	return t, nil
}

// release removes id and returns what it held.
func release[T any](id uintptr) (T, bool) {
	handles.Lock()
	defer handles.Unlock()
	t, ok := handles.m[id].(T)
	if ok {
		delete(handles.m, id)
	}
	return t, ok
}

func describe(v any) string { return fmt.Sprintf("%T", v) }
