package main

import (
	"fmt"
	"regexp"
	"strings"
)

// Python's raw layer (bindings/python/boxlite/_ffi.py) is built from a
// table of the header's functions, one row each, written here from the
// header itself: a function the header gains gets its Python function with
// no hand-written line, unless its parameters need logic of their own
// (buffers, structs), which the row says and _ffi.py must then provide.

// handleKinds are the header's opaque handle types, as boxlite_KIND_t; each
// has its boxlite_KIND_free.
var handleKinds = map[string]bool{"runtime": true, "box": true, "execution": true, "session": true, "cell": true, "forwarder": true}

// cFunc is one function declaration of the header.
type cFunc struct {
	name    string // without the boxlite_ prefix
	result  string // the C return type
	params  []cParam
	comment string // the comment above it (or above the group it ends)
}

type cParam struct{ typ, name string }

var (
	funcDecl  = regexp.MustCompile(`(?s)^(.*?)\bboxlite_(\w+)\s*\((.*)\)$`)
	paramDecl = regexp.MustCompile(`^(.*?)(\w+)$`)
	handleTyp = regexp.MustCompile(`^boxlite_(\w+)_t \*$`)
	handleOut = regexp.MustCompile(`^boxlite_(\w+)_t \*\*$`)
)

// headerFuncs returns the header's function declarations in order, each
// with the comment nearest above it.
func headerFuncs(header string) ([]cFunc, error) {
	body := preprocessorLine.ReplaceAllString(header, "")
	body = regexp.MustCompile(`(?m)^#.*\n`).ReplaceAllString(body, "")
	var funcs []cFunc
	comment, stmt := "", strings.Builder{}
	depth := 0
	for i := 0; i < len(body); i++ {
		if strings.HasPrefix(body[i:], "/*") {
			j := strings.Index(body[i:], "*/")
			if j < 0 {
				return nil, fmt.Errorf("include/boxlite.h: an unterminated comment")
			}
			comment = body[i : i+j+2]
			i += j + 1
			continue
		}
		c := body[i]
		switch c {
		case '{':
			depth++
		case '}':
			depth--
		}
		if c != ';' || depth != 0 {
			stmt.WriteByte(c)
			continue
		}
		s := strings.Join(strings.Fields(stmt.String()), " ")
		stmt.Reset()
		if strings.HasPrefix(s, "typedef") {
			continue
		}
		m := funcDecl.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		f := cFunc{name: m[2], result: cTypeName(m[1]), comment: comment}
		if args := strings.TrimSpace(m[3]); args != "void" {
			for _, a := range strings.Split(args, ",") {
				a = strings.TrimSpace(a)
				pm := paramDecl.FindStringSubmatch(a)
				if pm == nil {
					return nil, fmt.Errorf("boxlite_%s: parameter %q", f.name, a)
				}
				f.params = append(f.params, cParam{typ: cTypeName(pm[1]), name: pm[2]})
			}
		}
		funcs = append(funcs, f)
	}
	return funcs, nil
}

// cTypeName writes a C type one way: "const char *", "boxlite_box_t **".
func cTypeName(t string) string {
	t = strings.ReplaceAll(strings.TrimSpace(t), " ", "\x00")
	t = strings.ReplaceAll(strings.Join(strings.FieldsFunc(t, func(r rune) bool { return r == 0 }), " "), " *", "*")
	if i := strings.IndexByte(t, '*'); i > 0 {
		t = t[:i] + " " + t[i:]
	}
	return t
}

// nullable: the function's comment lets the string parameter be NULL
// ("options_json may be NULL", "name NULL or ...", "options_json (NULL: ...").
func nullable(f cFunc, param string) bool {
	text := strings.Join(strings.Fields(strings.NewReplacer("/*", " ", "*/", " ", " * ", " ").Replace(f.comment)), " ")
	return regexp.MustCompile(`\b` + param + `(:? NULL| may be NULL| \(NULL)\b`).MatchString(text)
}

// pyRow is the row of one function: how each parameter is passed, or
// CUSTOM when a parameter or the result needs logic of its own.
func pyRow(f cFunc, all map[string]bool) (string, error) {
	custom := fmt.Sprintf("    %q: CUSTOM,\n", f.name)
	hasErr := len(f.params) > 0 && f.params[len(f.params)-1].typ == "boxlite_error_t **"
	var result string
	switch {
	case f.result == "int" && hasErr:
		result = "status"
	case f.result == "int":
		result = "int"
	case f.result == "void":
		result = "void"
	case f.result == "const char *":
		result = "string"
	default:
		return custom, nil
	}
	params := f.params
	if hasErr {
		params = params[:len(params)-1]
	}
	var cols []string
	for i := 0; i < len(params); i++ {
		p := params[i]
		var kind, ctype string
		switch {
		case handleTyp.MatchString(p.typ) && handleKinds[handleTyp.FindStringSubmatch(p.typ)[1]]:
			kind, ctype = "handle", handleTyp.FindStringSubmatch(p.typ)[1]
		case handleOut.MatchString(p.typ) && handleKinds[handleOut.FindStringSubmatch(p.typ)[1]]:
			kind, ctype = "out_handle", handleOut.FindStringSubmatch(p.typ)[1]
			if !all[ctype+"_free"] {
				return "", fmt.Errorf("boxlite_%s: no boxlite_%s_free for its out handle", f.name, ctype)
			}
		case p.typ == "char **":
			kind = "out_string"
		case p.typ == "int *":
			kind = "out_int"
		case p.typ == "const char *" && nullable(f, p.name):
			kind = "str_or_null"
		case p.typ == "const char *":
			kind = "str"
		case p.typ == "int" || p.typ == "int64_t":
			kind = "int"
		case p.typ == "const uint8_t *" && i+1 < len(params) && params[i+1].typ == "size_t":
			kind = "bytes"
			i++ // its length
		case !hasErr && result == "void" && len(params) == 1 && strings.HasSuffix(p.typ, " *"):
			kind = "pointer" // a free of what the library allocated
		default:
			return custom, nil
		}
		cols = append(cols, fmt.Sprintf("(%q, %q, %q)", p.name, kind, ctype))
	}
	return fmt.Sprintf("    %q: (%q, (%s)),\n", f.name, result, strings.Join(cols, ", ")+trailingComma(len(cols))), nil
}

func trailingComma(n int) string {
	if n == 1 {
		return ","
	}
	return ""
}

// pythonCalls renders _calls.py from the header.
func pythonCalls(header string) (string, error) {
	funcs, err := headerFuncs(header)
	if err != nil {
		return "", err
	}
	if len(funcs) == 0 {
		return "", fmt.Errorf("include/boxlite.h: no functions")
	}
	all := map[string]bool{}
	for _, f := range funcs {
		all[f.name] = true
	}
	var b strings.Builder
	b.WriteString("# Code " + notice + "\n" + `"""The functions of include/boxlite.h, one row each, in the header's order.

A row is (result, params) for _ffi.py to build the function from:
result "status" (an int status and a trailing boxlite_error_t **err: raised
through check), "int", "void" or "string" (a static const char *; None for
NULL); each param (name, kind, handle kind) with kind "handle" (an input
handle), "str", "str_or_null" (the header lets it be NULL: None),
"int", "bytes" (a buffer and its length), "pointer" (passed as is),
"out_handle" (returned as a Handle), "out_string" (returned as str, freed)
or "out_int" (returned as int).
CUSTOM: the function needs logic of its own, written in _ffi.py.
"""

CUSTOM = None

CALLS = {
`)
	for _, f := range funcs {
		row, err := pyRow(f, all)
		if err != nil {
			return "", err
		}
		b.WriteString(row)
	}
	b.WriteString("}\n")
	return b.String(), nil
}
