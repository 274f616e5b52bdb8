package restapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/restapi/wire"
)

// Version is the API document's version.
const Version = "0.10.8-boxlite"

// OpenAPI is the API's OpenAPI 3.1 document, made from the route table
// and the wire types (served at GET /v1/openapi.json).
func OpenAPI() map[string]any {
	openAPIOnce.Do(func() { openAPIDoc = buildOpenAPI() })
	return openAPIDoc
}

var (
	openAPIOnce sync.Once
	openAPIDoc  map[string]any
)

func (a *API) getOpenAPI(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, OpenAPI())
	return nil
}

func buildOpenAPI() map[string]any {
	schemas := map[string]any{}
	paths := map[string]any{}
	for _, rt := range routes {
		op := map[string]any{"operationId": rt.id, "summary": rt.summary, "tags": []string{rt.tag}}
		if rt.public {
			op["security"] = []any{}
		}
		var params []any
		for _, name := range pathParams(rt.path) {
			params = append(params, map[string]any{"name": name, "in": "path", "required": true, "schema": pathParamSchema(name)})
		}
		for _, q := range rt.query {
			params = append(params, map[string]any{"name": q.name, "in": "query", "required": q.required, "description": q.doc, "schema": map[string]any{"type": q.typ}})
		}
		if rt.idempotent {
			params = append(params, map[string]any{"name": IdempotencyHeader, "in": "header", "required": false, "schema": map[string]any{"type": "string", "minLength": 1, "maxLength": idemKeyMax},
				"description": "Retrying with the same key and the same request replays the first answer (kept " + idemLifetimeISO + "); the same key with another request is a 422, while the first still runs a 409"})
		}
		if params != nil {
			op["parameters"] = params
		}
		switch {
		case rt.body != nil:
			op["requestBody"] = map[string]any{"required": !rt.bodyOptional, "content": map[string]any{
				"application/json": map[string]any{"schema": schemaRef(rt.body, schemas)}}}
		case rt.bodyRaw != "":
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
				rt.bodyRaw: map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}}
		}
		resps := map[string]any{}
		ok := map[string]any{"description": http.StatusText(rt.status)}
		switch {
		case rt.resp != nil:
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": schemaRef(rt.resp, schemas)}}
		case rt.respRaw != "":
			ok["content"] = map[string]any{rt.respRaw: map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}
		}
		resps[strconv.Itoa(rt.status)] = ok
		errRef := schemaRef(reflect.TypeFor[wire.ErrorResponse](), schemas)
		for _, code := range rt.errors {
			e := map[string]any{"description": http.StatusText(code)}
			if rt.method != "HEAD" {
				e["content"] = map[string]any{"application/json": map[string]any{"schema": errRef}}
			}
			resps[strconv.Itoa(code)] = e
		}
		op["responses"] = resps
		item, _ := paths[rt.path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[rt.path] = item
		}
		item[strings.ToLower(rt.method)] = op
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "boxlite serve: BoxLite's wire.Box API", "version": Version,
			"description": "BoxLite's REST API as boxlite serve speaks it. Every route but /config and /openapi.json needs `Authorization: Bearer <key>`. Operations of BoxLite's hosted cloud answer 501."},
		"servers":    []any{map[string]any{"url": "/v1"}},
		"security":   []any{map[string]any{"BearerAuth": []string{}}},
		"paths":      paths,
		"components": map[string]any{"schemas": schemas, "securitySchemes": map[string]any{"BearerAuth": map[string]any{"type": "http", "scheme": "bearer"}}},
	}
}

func pathParams(p string) []string {
	var out []string
	for _, seg := range strings.Split(p, "/") {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			out = append(out, seg[1:len(seg)-1])
		}
	}
	return out
}

func pathParamSchema(name string) map[string]any {
	switch name {
	case "box_id", "exec_id", "snapshot_name":
		return map[string]any{"type": "string", "pattern": idPattern.String()}
	case "image_id":
		return map[string]any{"type": "string", "pattern": digestPattern.String()}
	}
	return map[string]any{"type": "string"}
}

var secondsType = reflect.TypeFor[abi.Seconds]()

// schemaRef is t's schema: a $ref to a named struct (added to schemas),
// else the type's inline schema.
func schemaRef(t reflect.Type, schemas map[string]any) map[string]any {
	if t == secondsType {
		return map[string]any{"type": "number", "minimum": 0, "description": "seconds"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		s := schemaRef(t.Elem(), schemas)
		return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
	case reflect.Struct:
		if _, ok := schemas[t.Name()]; !ok {
			schemas[t.Name()] = map[string]any{} // recursion guard
			schemas[t.Name()] = structSchema(t, schemas)
		}
		return map[string]any{"$ref": "#/components/schemas/" + t.Name()}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": schemaRef(t.Elem(), schemas)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaRef(t.Elem(), schemas)}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Int, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Uint, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer", "minimum": 0}
	}
	panic("restapi: no schema for " + t.String())
}

func structSchema(t reflect.Type, schemas map[string]any) map[string]any {
	props := map[string]any{}
	var required []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		s := schemaRef(f.Type, schemas)
		if _, isRef := s["$ref"]; isRef && (f.Tag.Get("doc") != "" || f.Tag.Get("schema") != "") {
			s = map[string]any{"allOf": []any{s}}
		}
		if d := f.Tag.Get("doc"); d != "" {
			s["description"] = d
		}
		applyKeywords(s, f.Tag.Get("schema"))
		props[name] = s
		if !strings.Contains(opts, "omitempty") && f.Type.Kind() != reflect.Pointer {
			required = append(required, name)
		}
	}
	sort.Strings(required)
	out := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

// applyKeywords adds a schema tag's keywords: min, max (numbers or string
// lengths), pattern, enum (a|b), format.
func applyKeywords(s map[string]any, tag string) {
	if tag == "" {
		return
	}
	target := s
	if alts, ok := s["anyOf"].([]any); ok {
		target = alts[0].(map[string]any)
	}
	bound := map[string]map[string]string{ // the keyword of a min or max, by the value's type
		"string": {"min": "minLength", "max": "maxLength"},
		"array":  {"min": "minItems", "max": "maxItems"},
	}[fmt.Sprint(target["type"])]
	if bound == nil {
		bound = map[string]string{"min": "minimum", "max": "maximum"}
	}
	for _, kv := range strings.Split(tag, ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "min", "max":
			n, _ := strconv.Atoi(v)
			target[bound[k]] = n
		case "pattern":
			target["pattern"] = v
		case "format":
			target["format"] = v
		case "enum":
			target["enum"] = strings.Split(v, "|")
		}
	}
}

// MarshalOpenAPI is the document as indented JSON (docs and tests).
func MarshalOpenAPI() ([]byte, error) { return json.MarshalIndent(OpenAPI(), "", "  ") }
