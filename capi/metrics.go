package main

// #include "capi.h"
import "C"

import (
	"context"
)

//export boxlite_box_metrics
func boxlite_box_metrics(p *C.boxlite_box_t, out **C.char, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	o, err := boxOf(p)
	if err == nil {
		m, merr := o.b.Metrics(context.Background())
		if err = merr; err == nil {
			err = outJSON(m, out)
		}
	}
	return status(err, cerr)
}

//export boxlite_runtime_metrics
func boxlite_runtime_metrics(p *C.boxlite_runtime_t, out **C.char, cerr **C.boxlite_error_t) (rc C.int) {
	defer guard(&rc, cerr)
	rt, err := runtimeOf(p)
	if err == nil {
		m, merr := rt.Metrics(context.Background())
		if err = merr; err == nil {
			err = outJSON(m, out)
		}
	}
	return status(err, cerr)
}
