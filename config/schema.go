package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/knadh/koanf/maps"
	"github.com/knadh/koanf/v2"
	"gopkg.in/yaml.v3"
)

// The keys and value types every source is checked against are the Config
// struct's own: its koanf tags and field types. There is no second list to
// keep in step.
var (
	configType   = reflect.TypeFor[Config]()
	durationType = reflect.TypeFor[Duration]()
)

// decoder checks YAML nodes against a type and turns them into plain values
// of exactly the field's type, so what reaches koanf is already valid.
// where says where a node came from ("(config.yaml:3)", "(from --set x)").
type decoder struct {
	where func(n *yaml.Node) string
	errs  []error
}

func (d *decoder) fail(n *yaml.Node, key, format string, args ...any) {
	if key != "" {
		key += ": "
	}
	d.errs = append(d.errs, fmt.Errorf("config: %s%s %s", key, fmt.Sprintf(format, args...), d.where(n)))
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

func join(key, field string) string {
	if key == "" {
		return field
	}
	return key + "." + field
}

// fieldTypes maps a struct's koanf tags to its field types.
func fieldTypes(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type, t.NumField())
	for f := range t.Fields() {
		if tag := f.Tag.Get("koanf"); tag != "" {
			out[tag] = f.Type
		}
	}
	return out
}

// value decodes n as a t. A null becomes t's zero value; inside a mapping
// a null key is skipped instead, so "slack:" with nothing under it keeps
// the defaults.
func (d *decoder) value(t reflect.Type, n *yaml.Node, key string) (any, bool) {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch {
	case t == durationType:
		var v Duration
		if isNull(n) {
			return v, true
		}
		if n.Kind != yaml.ScalarNode {
			d.fail(n, key, "want a duration such as \"30s\"")
			return nil, false
		}
		if err := v.UnmarshalText([]byte(n.Value)); err != nil {
			d.fail(n, key, "%v", err)
			return nil, false
		}
		return v, true
	case t.Kind() == reflect.Struct:
		return d.mapping(t, n, key)
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String:
		// Free-form names to words (an MCP server's env and headers).
		out := map[string]any{}
		if isNull(n) {
			return out, true
		}
		if n.Kind != yaml.MappingNode {
			d.fail(n, key, "want a mapping of names to values, not %s", show(n))
			return nil, false
		}
		ok := true
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || v.Kind != yaml.ScalarNode {
				d.fail(v, join(key, k.Value), "want a single value, not %s", show(v))
				ok = false
				continue
			}
			out[k.Value] = v.Value
		}
		return out, ok
	case t.Kind() == reflect.Slice:
		if isNull(n) {
			return []any{}, true
		}
		if n.Kind == yaml.ScalarNode && t.Elem().Kind() == reflect.String {
			// A list of words from an environment variable or --set:
			// "https://a.example,https://b.example".
			out := []any{}
			for _, part := range strings.Split(n.Value, ",") {
				if part = strings.TrimSpace(part); part != "" {
					out = append(out, part)
				}
			}
			return out, true
		}
		if n.Kind != yaml.SequenceNode {
			d.fail(n, key, "want a list (- name: …)")
			return nil, false
		}
		out := make([]any, 0, len(n.Content))
		ok := true
		for i, item := range n.Content {
			v, good := d.value(t.Elem(), item, fmt.Sprintf("%s[%d]", key, i))
			ok = ok && good
			out = append(out, v)
		}
		return out, ok
	case t.Kind() == reflect.String:
		if isNull(n) {
			return "", true
		}
		if n.Kind != yaml.ScalarNode {
			d.fail(n, key, "want a single value, not a list or mapping")
			return nil, false
		}
		return n.Value, true
	case t.Kind() == reflect.Bool:
		var v bool
		if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil {
			d.fail(n, key, "want true or false, not %s", show(n))
			return nil, false
		}
		return v, true
	case t.Kind() == reflect.Int:
		var v int
		if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil {
			d.fail(n, key, "want a whole number, not %s", show(n))
			return nil, false
		}
		return v, true
	case t.Kind() == reflect.Float64:
		var v float64
		if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil {
			d.fail(n, key, "want a number, not %s", show(n))
			return nil, false
		}
		return v, true
	case t.Kind() == reflect.Int64:
		var v int64
		if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil {
			d.fail(n, key, "want a whole number, not %s", show(n))
			return nil, false
		}
		return v, true
	}
	// Only reachable when a field of a new type is added to Config.
	d.fail(n, key, "config has no decoder for %s", t)
	return nil, false
}

func (d *decoder) mapping(t reflect.Type, n *yaml.Node, key string) (any, bool) {
	out := map[string]any{}
	if isNull(n) {
		return out, true
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n, key, "want a mapping of keys, not %s", show(n))
		return nil, false
	}
	fields := fieldTypes(t)
	seen := map[string]bool{}
	ok := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := join(key, k.Value)
		ft, known := fields[k.Value]
		switch {
		case k.Kind != yaml.ScalarNode || !known:
			d.errs = append(d.errs, fmt.Errorf("config: unknown key %q %s", name, d.where(k)))
			ok = false
			continue
		case seen[k.Value]:
			d.fail(k, name, "set twice")
			ok = false
			continue
		}
		seen[k.Value] = true
		if isNull(v) {
			continue
		}
		val, good := d.value(ft, v, name)
		if good {
			out[k.Value] = val
		}
		ok = ok && good
	}
	return out, ok
}

// show quotes a scalar for a message, or names the kind of node.
func show(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	return "that"
}

// yamlLine finds the "line N" yaml.v3 puts in syntax errors.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// decodeFile checks a whole config file and returns it as a nested map,
// every unknown key and bad value reported with its line.
func decodeFile(path string, data []byte) (map[string]any, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			return nil, fmt.Errorf("config: %s:%s: invalid YAML: %s", path, m[1], m[2])
		}
		return nil, fmt.Errorf("config: %s: invalid YAML: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return map[string]any{}, nil
	}
	d := decoder{where: func(n *yaml.Node) string { return fmt.Sprintf("(%s:%d)", path, n.Line) }}
	v, _ := d.value(configType, doc.Content[0], "")
	if err := errors.Join(d.errs...); err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

// target is where a dotted key leads in Config.
type target struct {
	segs    []string
	typ     reflect.Type
	display string // providers[0].base_url
	listAt  int    // index in segs of the first list index, or -1
}

func resolve(key string) (target, bool) {
	tg := target{segs: strings.Split(key, "."), typ: configType, listAt: -1}
	for i, seg := range tg.segs {
		switch tg.typ.Kind() {
		case reflect.Struct:
			ft, ok := fieldTypes(tg.typ)[seg]
			if !ok {
				return tg, false
			}
			tg.typ, tg.display = ft, join(tg.display, seg)
		case reflect.Slice:
			n, err := strconv.Atoi(seg)
			if err != nil || n < 0 || strconv.Itoa(n) != seg {
				return tg, false
			}
			if tg.listAt < 0 {
				tg.listAt = i
			}
			tg.typ, tg.display = tg.typ.Elem(), tg.display+"["+seg+"]"
		default:
			return tg, false
		}
	}
	return tg, true
}

// override applies one environment variable or --set flag. Values are YAML
// ("true", "30s", "[a, b]", "{enabled: true}"); for a text key from the
// environment the value is taken literally, since a variable holding an
// API key is not meant to be read as YAML.
func override(k *koanf.Koanf, key, text, origin string, literal bool) error {
	tg, ok := resolve(key)
	if !ok {
		return fmt.Errorf("config: unknown key %q (from %s)", key, origin)
	}
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: text}
	if !literal || tg.typ.Kind() != reflect.String {
		var doc yaml.Node
		err := yaml.Unmarshal([]byte(text), &doc)
		switch {
		case err == nil && len(doc.Content) > 0 && (tg.typ.Kind() != reflect.String || doc.Content[0].Kind == yaml.ScalarNode):
			n = doc.Content[0]
		case tg.typ.Kind() == reflect.String:
			// Not a YAML scalar ("a: b", "# x"): the text as it is.
		case err != nil:
			return fmt.Errorf("config: %s: invalid YAML value: %w (from %s)", tg.display, err, origin)
		}
	}
	d := decoder{where: func(*yaml.Node) string { return "(from " + origin + ")" }}
	v, _ := d.value(tg.typ, n, tg.display)
	if err := errors.Join(d.errs...); err != nil {
		return err
	}
	if err := set(k, tg, v); err != nil {
		return fmt.Errorf("config: %s: %w (from %s)", tg.display, err, origin)
	}
	return nil
}

// set puts v at the target. koanf merges maps but replaces lists whole, so
// a key inside a list entry is set by rewriting that entry.
func set(k *koanf.Koanf, tg target, v any) error {
	if tg.listAt < 0 {
		return k.Set(strings.Join(tg.segs, "."), v)
	}
	prefix := strings.Join(tg.segs[:tg.listAt], ".")
	list, _ := k.Get(prefix).([]any)
	i, _ := strconv.Atoi(tg.segs[tg.listAt])
	switch {
	case i == len(list):
		list = append(list, map[string]any{})
	case i > len(list):
		return fmt.Errorf("%s has %d entries; add entry %d first", prefix, len(list), len(list))
	}
	list[i] = setIn(list[i], tg.segs[tg.listAt+1:], v)
	return k.Set(prefix, list)
}

func setIn(cur any, segs []string, v any) any {
	m, _ := cur.(map[string]any)
	if len(segs) == 0 {
		if nv, ok := v.(map[string]any); ok && m != nil {
			maps.Merge(nv, m)
			return m
		}
		return v
	}
	if m == nil {
		m = map[string]any{}
	}
	m[segs[0]] = setIn(m[segs[0]], segs[1:], v)
	return m
}
