package main

/*
#include "capi.h"

// Handle casts for sessions and cells (see cgo.go); declared in session.go.
uintptr_t bx_sess_id(boxlite_session_t *p) { return (uintptr_t)p; }
uintptr_t bx_cell_id(boxlite_cell_t *p) { return (uintptr_t)p; }
void bx_set_sess(boxlite_session_t **out, uintptr_t id) { *out = (boxlite_session_t *)id; }
void bx_set_cell(boxlite_cell_t **out, uintptr_t id) { *out = (boxlite_cell_t *)id; }
*/
import "C"
