/* Private to capi: const-qualified aliases so Go exports match boxlite.h
 * exactly, and the handle casts defined in cgo.go. */
#ifndef BOXLITE_CAPI_H
#define BOXLITE_CAPI_H
#include <stdlib.h>
#include "boxlite.h"
typedef const char cchar_t;
typedef const uint8_t cuint8_t;
uintptr_t bx_rt_id(boxlite_runtime_t *p);
uintptr_t bx_box_id(boxlite_box_t *p);
uintptr_t bx_ex_id(boxlite_execution_t *p);
void bx_set_rt(boxlite_runtime_t **out, uintptr_t id);
void bx_set_box(boxlite_box_t **out, uintptr_t id);
void bx_set_ex(boxlite_execution_t **out, uintptr_t id);
const char *bx_self_path(void);
#endif
