package main

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/boxlite/boxlite/internal/abi"
)

// The wire structs' documentation, as the header's comment blocks and
// index.d.ts's types: from each field's json, doc and enum tags
// (internal/abi/wire.go).

// wireField is one field of a wire struct.
type wireField struct {
	name     string // the JSON name
	typ      reflect.Type
	omit     bool // absent when empty (omitempty or a pointer)
	null     bool // null when not known (a pointer always present)
	required bool // a caller must give it (its doc starts "required")
	doc      string
	enum     []string
}

var placeholder = regexp.MustCompile(`\{([A-Z_]+)\}`)

// resolve replaces each {NAME} in doc by the Constant's value.
func resolve(doc string) (string, error) {
	var missing []string
	out := placeholder.ReplaceAllStringFunc(doc, func(m string) string {
		name := m[1 : len(m)-1]
		for _, c := range abi.Constants {
			if c.Name == name {
				return value(c, false)
			}
		}
		missing = append(missing, name)
		return m
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("doc %q names no constant %v", doc, missing)
	}
	return out, nil
}

func wireFields(t reflect.Type) ([]wireField, error) {
	var fs []wireField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" || name == "-" {
			return nil, fmt.Errorf("%s.%s: no json name", t.Name(), f.Name)
		}
		doc, err := resolve(f.Tag.Get("doc"))
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
		}
		omitempty := strings.Contains(opts, "omitempty")
		w := wireField{name: name, typ: f.Type, omit: omitempty || f.Type.Kind() == reflect.Pointer, doc: doc,
			null: !omitempty && f.Type.Kind() == reflect.Pointer}
		if rest, ok := strings.CutPrefix(doc, "required"); ok {
			w.required, w.doc = true, strings.TrimLeft(rest, ": ")
		}
		if e := f.Tag.Get("enum"); e != "" {
			w.enum = strings.Split(e, ",")
		}
		fs = append(fs, w)
	}
	return fs, nil
}

func elem(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// cType is how the header names a JSON type.
func cType(t reflect.Type, enum []string) string {
	t = elem(t)
	if len(enum) > 0 {
		return `"` + strings.Join(enum, `" | "`) + `"`
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64, reflect.Uint64:
		return "integer"
	case reflect.Float64:
		return "number"
	case reflect.Slice:
		return "[" + cType(t.Elem(), nil) + "]"
	case reflect.Map:
		return "{string: " + cType(t.Elem(), nil) + "}"
	case reflect.Struct:
		return "{...}"
	}
	panic("abigen: no C name for " + t.String())
}

// cBlock documents the JSON object of t, one field an entry, nested
// objects indented under their field, as lines of a C comment.
func cBlock(t reflect.Type, input bool) (string, error) {
	var b strings.Builder
	if err := cFields(&b, t, input, 1); err != nil {
		return "", err
	}
	return b.String(), nil
}

func cFields(b *strings.Builder, t reflect.Type, input bool, depth int) error {
	fs, err := wireFields(t)
	if err != nil {
		return err
	}
	indent := strings.Repeat("  ", depth)
	for _, f := range fs {
		if strings.Contains(f.doc, "*/") || strings.Contains(f.doc, "/*") {
			return fmt.Errorf("%s.%s: a comment delimiter in its doc", t.Name(), f.name)
		}
		entry := fmt.Sprintf("%q: %s", f.name, cType(f.typ, f.enum))
		switch {
		case input && f.required:
			entry += ", required"
		case !input && f.null:
			entry += " or null"
		case !input && f.omit:
			entry += ", optional"
		}
		if f.doc != "" {
			entry += ": " + f.doc
		}
		wrap(b, " * "+indent, " * "+indent+"    ", entry)
		inner := elem(f.typ)
		if inner.Kind() == reflect.Slice {
			inner = elem(inner.Elem())
		}
		if inner.Kind() == reflect.Struct {
			if err := cFields(b, inner, input, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// wrap writes text in lines of at most 96 columns.
func wrap(b *strings.Builder, first, next, text string) {
	line := first
	fresh := true
	for _, w := range strings.Fields(text) {
		if !fresh && len(line)+1+len(w) > 96 {
			b.WriteString(line + "\n")
			line, fresh = next, true
		}
		if fresh {
			line += w
		} else {
			line += " " + w
		}
		fresh = false
	}
	b.WriteString(line + "\n")
}

// tsType names the TypeScript type of a field.
func tsType(t reflect.Type, enum []string, names map[reflect.Type]string) (string, error) {
	t = elem(t)
	if len(enum) > 0 {
		return "'" + strings.Join(enum, "' | '") + "'", nil
	}
	switch t.Kind() {
	case reflect.String:
		return "string", nil
	case reflect.Bool:
		return "boolean", nil
	case reflect.Int, reflect.Int64, reflect.Uint64, reflect.Float64:
		return "number", nil
	case reflect.Slice:
		e, err := tsType(t.Elem(), nil, names)
		return e + "[]", err
	case reflect.Map:
		e, err := tsType(t.Elem(), nil, names)
		return "Record<string, " + e + ">", err
	case reflect.Struct:
		if n, ok := names[t]; ok {
			return n, nil
		}
	}
	return "", fmt.Errorf("no TypeScript name for %s", t)
}

func camel(s string) string {
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
	}
	return strings.Join(parts, "")
}

// tsDecl is one TypeScript interface from a wire struct, camelCased as the
// Node SDK takes and returns it. An input's fields are optional unless
// required; an output's unless always present. override replaces a field's
// declaration (by JSON name; "" drops it); extra declarations follow.
type tsDecl struct {
	name     string
	doc      string
	t        reflect.Type
	input    bool
	names    map[reflect.Type]string // the TS names of nested structs
	override map[string]string
	extra    []string
}

func (d tsDecl) render() (string, error) {
	fs, err := wireFields(d.t)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "/** %s */\nexport interface %s {\n", d.doc, d.name)
	for _, f := range fs {
		decl, ok := d.override[f.name]
		if !ok {
			typ, err := tsType(f.typ, f.enum, d.names)
			if err != nil {
				return "", fmt.Errorf("%s.%s: %w", d.name, f.name, err)
			}
			opt := "?"
			if (d.input && f.required) || (!d.input && !f.omit) {
				opt = ""
			}
			decl = camel(f.name) + opt + ": " + typ + ";"
		}
		if decl == "" {
			continue
		}
		if f.doc != "" {
			fmt.Fprintf(&b, "  /** %s */\n", strings.ReplaceAll(f.doc, "*/", "* /"))
		}
		fmt.Fprintf(&b, "  %s\n", decl)
	}
	for _, e := range d.extra {
		b.WriteString(e)
	}
	b.WriteString("}\n")
	return b.String(), nil
}

// tsTypes: index.d.ts's option and info types.
func tsTypes() (string, error) {
	in := map[reflect.Type]string{reflect.TypeFor[abi.Network](): "NetworkSpec", reflect.TypeFor[abi.Port](): "PortSpec",
		reflect.TypeFor[abi.Volume](): "Volume", reflect.TypeFor[abi.Secret](): "SecretSpec", reflect.TypeFor[abi.NetworkDirection](): "NetworkDirectionSpec"}
	out := map[reflect.Type]string{reflect.TypeFor[abi.Network](): "NetworkSpec", reflect.TypeFor[abi.Port](): "PortMapping",
		reflect.TypeFor[abi.Volume](): "Volume", reflect.TypeFor[abi.NetworkInfo](): "NetworkInfo",
		reflect.TypeFor[abi.NetworkStats](): "NetworkStats", reflect.TypeFor[abi.BoxRuntimeInfo](): "BoxRuntimeInfo",
		reflect.TypeFor[abi.SecretInfo]():       "SecretInfo",
		reflect.TypeFor[abi.NetworkDirection](): "NetworkDirectionInfo", reflect.TypeFor[abi.BoxNetwork](): "BoxNetworkInfo"}
	decls := []tsDecl{
		{name: "JsBoxOptions", doc: "How to create a box: the C ABI's box options (internal/abi.BoxOptions), camelCased.", t: reflect.TypeFor[abi.BoxOptions](), input: true, names: in,
			override: map[string]string{
				"image":   "image?: string; // required by runtime.create; SimpleBox has a default",
				"env":     "env?: EnvInput;",
				"network": "network?: NetworkSpec | 'enabled' | 'disabled';",
				"secrets": "secrets?: (SecretSpec | Secret)[];",
				// BoxLite's names (maxFileSize, interval, ...), not the wire's: the SDK maps them.
				"advanced": "advanced?: AdvancedBoxOptions;",
			},
			extra: []string{"  /** BoxLite 0.10's: 0 keeps the box after stop, above 0 deletes it at stop (the SDK sets auto_remove); it takes precedence over autoRemove */\n  autoDelete?: number;\n",
				"  /** BoxLite 0.10's place for them (or in advanced, not both) */\n  security?: SecurityOptions;\n  healthCheck?: HealthCheckOptions;\n"}},
		{name: "NetworkSpec", doc: "A box's network (internal/abi.Network): BoxLite's split form or the flat one.", t: reflect.TypeFor[abi.Network](), input: true, names: in},
		{name: "NetworkDirectionSpec", doc: "One direction of a box's network policy (internal/abi.NetworkDirection).", t: reflect.TypeFor[abi.NetworkDirection](), input: true, names: in},
		{name: "NetworkDirectionInfo", doc: "One direction of a box's network policy as info reports it.", t: reflect.TypeFor[abi.NetworkDirection](), names: out},
		{name: "BoxNetworkInfo", doc: "A box's network policy as BoxLite's info reports it (internal/abi.BoxNetwork).", t: reflect.TypeFor[abi.BoxNetwork](), names: out},
		{name: "PortSpec", doc: "A box port to publish on the host (internal/abi.Port).", t: reflect.TypeFor[abi.Port](), input: true, names: in},
		{name: "Volume", doc: "A host folder or file in the box (internal/abi.Volume).", t: reflect.TypeFor[abi.Volume](), input: true, names: in},
		{name: "SecretSpec", doc: "A credential the box uses without holding it (internal/abi.Secret); the Secret class builds one.", t: reflect.TypeFor[abi.Secret](), input: true, names: in},
		{name: "SecretInfo", doc: "A box's secret as info shows it: never its value (internal/abi.SecretInfo).", t: reflect.TypeFor[abi.SecretInfo](), names: out},
		{name: "PortMapping", doc: "A published port as bound (internal/abi.Port).", t: reflect.TypeFor[abi.Port](), names: out},
		{name: "NetworkStats", doc: "What a box's network did (internal/abi.NetworkStats).", t: reflect.TypeFor[abi.NetworkStats](), names: out},
		{name: "NetworkInfo", doc: "A running box's network (internal/abi.NetworkInfo).", t: reflect.TypeFor[abi.NetworkInfo](), names: out},
		{name: "BoxRuntimeInfo", doc: "What a running box reports about its VM (internal/abi.BoxRuntimeInfo).", t: reflect.TypeFor[abi.BoxRuntimeInfo](), names: out},
		{name: "BoxConfig", doc: "What a box was created with, defaults applied (internal/abi.BoxConfig); JsBoxInfo has its fields.", t: reflect.TypeFor[abi.BoxConfig](), names: out,
			override: map[string]string{"advanced": "advanced?: AdvancedBoxOptions; // as given, in BoxLite's names"}},
	}
	var parts []string
	for _, d := range decls {
		s, err := d.render()
		if err != nil {
			return "", err
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "\n"), nil
}
