package k8sdocs

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"time"
)

// A small structural validator over an OpenAPI v3 schema as the
// Kubernetes API server applies it on create: CRDs' openAPIV3Schema
// (structural schemas) and the built-in types' published OpenAPI v3
// ($ref, allOf wrappers, oneOf). It checks types, required (after
// defaults), properties and unknown fields (additionalProperties,
// x-kubernetes-preserve-unknown-fields), enums, patterns, formats
// (int32, int64, date-time), bounds, int-or-string and list-map keys.
// CEL rules (x-kubernetes-validations) are not evaluated: a transition
// rule (one that reads oldSelf) does not apply on create, any other one
// is reported as an error so that a new rule is looked at, not passed.
type validator struct {
	refs map[string]any // "#/components/schemas/X" -> schema
	errs []string
}

func (v *validator) errf(path, format string, args ...any) {
	v.errs = append(v.errs, path+": "+fmt.Sprintf(format, args...))
}

func (v *validator) resolve(path string, s map[string]any) map[string]any {
	for depth := 0; depth < 32; depth++ {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		t, ok := v.refs[ref].(map[string]any)
		if !ok {
			v.errf(path, "schema reference %q not found", ref)
			return map[string]any{"x-kubernetes-preserve-unknown-fields": true}
		}
		s = t
	}
	v.errf(path, "schema references loop")
	return map[string]any{"x-kubernetes-preserve-unknown-fields": true}
}

// check reports whether value matches schema without recording errors.
func (v *validator) check(path string, value any, s map[string]any) bool {
	sub := &validator{refs: v.refs}
	sub.validate(path, value, s)
	return len(sub.errs) == 0
}

func (v *validator) validate(path string, value any, s map[string]any) {
	s = v.resolve(path, s)
	if all, ok := s["allOf"].([]any); ok {
		for _, a := range all {
			if as, ok := a.(map[string]any); ok {
				v.validate(path, value, as)
			}
		}
	}
	if one, ok := s["oneOf"].([]any); ok {
		n := 0
		for _, a := range one {
			if as, ok := a.(map[string]any); ok && v.check(path, value, as) {
				n++
			}
		}
		if n != 1 {
			v.errf(path, "%v matches %d of the oneOf schemas, not one", value, n)
		}
	}
	if anyOf, ok := s["anyOf"].([]any); ok && s["x-kubernetes-int-or-string"] != true {
		n := 0
		for _, a := range anyOf {
			if as, ok := a.(map[string]any); ok && v.check(path, value, as) {
				n++
			}
		}
		if n == 0 {
			v.errf(path, "%v matches none of the anyOf schemas", value)
		}
	}
	if rules, ok := s["x-kubernetes-validations"].([]any); ok {
		for _, r := range rules {
			rule, _ := r.(map[string]any)["rule"].(string)
			if !strings.Contains(rule, "oldSelf") {
				v.errf(path, "CEL rule %q is not evaluated by this validator", rule)
			}
		}
	}
	if value == nil {
		if s["nullable"] != true {
			v.errf(path, "null is not allowed")
		}
		return
	}
	if s["x-kubernetes-int-or-string"] == true {
		switch value.(type) {
		case string, int, int64, uint64:
		default:
			v.errf(path, "%v (%T) is neither an integer nor a string", value, value)
			return
		}
	}
	typ, _ := s["type"].(string)
	switch typ {
	case "object":
		m, ok := value.(map[string]any)
		if !ok {
			v.errf(path, "%T is not an object", value)
			return
		}
		v.object(path, m, s)
	case "array":
		a, ok := value.([]any)
		if !ok {
			v.errf(path, "%T is not an array", value)
			return
		}
		v.array(path, a, s)
	case "string":
		str, ok := value.(string)
		if !ok {
			v.errf(path, "%v (%T) is not a string", value, value)
			return
		}
		v.str(path, str, s)
	case "integer":
		n, ok := asInt(value)
		if !ok {
			v.errf(path, "%v (%T) is not an integer", value, value)
			return
		}
		v.number(path, float64(n), s)
		if f, _ := s["format"].(string); f == "int32" && (n < math.MinInt32 || n > math.MaxInt32) {
			v.errf(path, "%d is out of int32", n)
		}
	case "number":
		f, ok := asFloat(value)
		if !ok {
			v.errf(path, "%v (%T) is not a number", value, value)
			return
		}
		v.number(path, f, s)
	case "boolean":
		if _, ok := value.(bool); !ok {
			v.errf(path, "%v (%T) is not a boolean", value, value)
		}
	case "":
		if str, ok := value.(string); ok {
			v.str(path, str, s)
		}
	default:
		v.errf(path, "schema type %q unknown to the validator", typ)
	}
	if enum, ok := s["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if fmt.Sprint(e) == fmt.Sprint(value) {
				found = true
			}
		}
		if !found {
			v.errf(path, "%v is not one of %v", value, enum)
		}
	}
}

func (v *validator) object(path string, m map[string]any, s map[string]any) {
	props, _ := s["properties"].(map[string]any)
	for _, r := range asSlice(s["required"]) {
		name, _ := r.(string)
		if _, ok := m[name]; ok {
			continue
		}
		if ps, ok := props[name].(map[string]any); ok {
			if _, ok := v.resolve(path, ps)["default"]; ok {
				continue // defaulted before validation
			}
		}
		v.errf(path, "required field %q is missing", name)
	}
	if max, ok := asInt(s["maxProperties"]); ok && int64(len(m)) > max {
		v.errf(path, "%d properties, at most %d", len(m), max)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := path + "." + k
		if ps, ok := props[k].(map[string]any); ok {
			v.validate(p, m[k], ps)
			continue
		}
		switch ap := s["additionalProperties"].(type) {
		case map[string]any:
			v.validate(p, m[k], ap)
			continue
		case bool:
			if ap {
				continue
			}
		}
		if s["x-kubernetes-preserve-unknown-fields"] == true {
			continue
		}
		v.errf(p, "unknown field")
	}
}

func (v *validator) array(path string, a []any, s map[string]any) {
	if min, ok := asInt(s["minItems"]); ok && int64(len(a)) < min {
		v.errf(path, "%d items, at least %d", len(a), min)
	}
	if max, ok := asInt(s["maxItems"]); ok && int64(len(a)) > max {
		v.errf(path, "%d items, at most %d", len(a), max)
	}
	items, _ := s["items"].(map[string]any)
	for i, e := range a {
		if items != nil {
			v.validate(fmt.Sprintf("%s[%d]", path, i), e, items)
		}
	}
	switch s["x-kubernetes-list-type"] {
	case "map":
		// Keys are unique, defaults (such as a port's protocol) counted.
		props := map[string]any{}
		if items != nil {
			props, _ = v.resolve(path, items)["properties"].(map[string]any)
		}
		seen := map[string]int{}
		for i, e := range a {
			m, _ := e.(map[string]any)
			var key []string
			for _, k := range asSlice(s["x-kubernetes-list-map-keys"]) {
				name, _ := k.(string)
				val, ok := m[name]
				if !ok {
					if ps, ok := props[name].(map[string]any); ok {
						val = v.resolve(path, ps)["default"]
					}
				}
				key = append(key, fmt.Sprint(val))
			}
			ks := strings.Join(key, "/")
			if j, dup := seen[ks]; dup {
				v.errf(fmt.Sprintf("%s[%d]", path, i), "duplicate list-map key %s (as [%d])", ks, j)
			}
			seen[ks] = i
		}
	case "set":
		seen := map[string]bool{}
		for i, e := range a {
			k := fmt.Sprint(e)
			if seen[k] {
				v.errf(fmt.Sprintf("%s[%d]", path, i), "duplicate set item %v", e)
			}
			seen[k] = true
		}
	}
}

func (v *validator) str(path, str string, s map[string]any) {
	if p, ok := s["pattern"].(string); ok {
		re, err := regexp.Compile(p)
		if err != nil {
			v.errf(path, "pattern %q does not compile here: %v", p, err)
		} else if !re.MatchString(str) {
			v.errf(path, "%q does not match %s", str, p)
		}
	}
	if max, ok := asInt(s["maxLength"]); ok && int64(len([]rune(str))) > max {
		v.errf(path, "%q is longer than %d", str, max)
	}
	if min, ok := asInt(s["minLength"]); ok && int64(len([]rune(str))) < min {
		v.errf(path, "%q is shorter than %d", str, min)
	}
	if f, _ := s["format"].(string); f == "date-time" {
		if _, err := time.Parse(time.RFC3339, str); err != nil {
			v.errf(path, "%q is not a date-time: %v", str, err)
		}
	}
}

func (v *validator) number(path string, f float64, s map[string]any) {
	if min, ok := asFloat(s["minimum"]); ok && f < min {
		v.errf(path, "%v is below the minimum %v", f, min)
	}
	if max, ok := asFloat(s["maximum"]); ok && f > max {
		v.errf(path, "%v is above the maximum %v", f, max)
	}
}

func asSlice(x any) []any { a, _ := x.([]any); return a }

func asInt(x any) (int64, bool) {
	switch n := x.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case uint64:
		if n > math.MaxInt64 {
			return 0, false
		}
		return int64(n), true
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1<<53 {
			return int64(n), true
		}
	}
	return 0, false
}

func asFloat(x any) (float64, bool) {
	switch n := x.(type) {
	case float64:
		return n, true
	case int, int64, uint64:
		i, ok := asInt(n)
		return float64(i), ok
	}
	return 0, false
}
