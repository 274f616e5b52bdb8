package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include -I${SRCDIR}
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include "capi.h"

// Handles travel as pointer-typed tokens; these casts keep unsafe pointer
// arithmetic out of Go.
uintptr_t bx_rt_id(boxlite_runtime_t *p) { return (uintptr_t)p; }
uintptr_t bx_box_id(boxlite_box_t *p) { return (uintptr_t)p; }
uintptr_t bx_ex_id(boxlite_execution_t *p) { return (uintptr_t)p; }
void bx_set_rt(boxlite_runtime_t **out, uintptr_t id) { *out = (boxlite_runtime_t *)id; }
void bx_set_box(boxlite_box_t **out, uintptr_t id) { *out = (boxlite_box_t *)id; }
void bx_set_ex(boxlite_execution_t **out, uintptr_t id) { *out = (boxlite_execution_t *)id; }

// The path of this shared library, to find the assets installed beside it.
const char *bx_self_path(void) {
	Dl_info info;
	if (dladdr((void *)bx_self_path, &info) && info.dli_fname) return info.dli_fname;
	return NULL;
}
*/
import "C"
