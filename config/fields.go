package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/edge-voice/edge/internal/confcheck"
)

// The reflection over Config's tags lives here: restart-only fields
// (reload:"restart"), secrets (secret:"true"|"url") and the flat key=value
// view used by String, LogValue and the reload log.

// leaf is one key of a struct: a field that is not a section.
type leaf struct {
	path    string
	field   reflect.StructField
	value   reflect.Value
	restart bool // the field or a section around it is reload:"restart"
}

// leaves lists the keys of the struct v in field order: nested sections as
// "a.b", squashed (embedded) ones with no key of their own; a list or a map
// is one leaf.
func leaves(v reflect.Value, prefix string, restart bool) []leaf {
	var out []leaf
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		r := restart || f.Tag.Get("reload") == "restart"
		name := koanfName(f)
		switch {
		case !f.IsExported() || name == "-":
		case f.Anonymous && fv.Kind() == reflect.Struct:
			out = append(out, leaves(fv, prefix, r)...)
		case fv.Kind() == reflect.Struct:
			out = append(out, leaves(fv, prefix+name+".", r)...)
		default:
			out = append(out, leaf{prefix + name, f, fv, r})
		}
	}
	return out
}

// koanfName is a field's key: its koanf tag, else its name lower-cased.
func koanfName(f reflect.StructField) string {
	if name, _, _ := strings.Cut(f.Tag.Get("koanf"), ","); name != "" {
		return name
	}
	return strings.ToLower(f.Name)
}

// structList reports a non-empty list of structs (pods.static), shown item
// by item.
func structList(v reflect.Value) bool {
	return v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct && v.Len() > 0
}

// structMap reports a non-empty map of structs by name
// (providers.plugins), shown entry by entry under each name.
func structMap(v reflect.Value) bool {
	return v.Kind() == reflect.Map && v.Type().Key().Kind() == reflect.String &&
		v.Type().Elem().Kind() == reflect.Struct && v.Len() > 0
}

// entry is one key of the flat view.
type entry struct {
	path  string
	value any
}

// entries flattens c into keys in field order, list items as "a[0].b", the
// tiers as one JSON value. With redact, secrets are hidden.
func entries(c *Config, redact bool) []entry {
	var out []entry
	var add func(ls []leaf)
	add = func(ls []leaf) {
		for _, l := range ls {
			switch secret := l.field.Tag.Get("secret"); {
			case structList(l.value):
				for j := range l.value.Len() {
					add(leaves(l.value.Index(j), fmt.Sprintf("%s[%d].", l.path, j), false))
				}
			case structMap(l.value):
				keys := l.value.MapKeys()
				slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
				for _, k := range keys {
					add(leaves(l.value.MapIndex(k), l.path+"."+k.String()+".", false))
				}
			case l.value.Kind() == reflect.Slice && l.value.Len() == 0:
				out = append(out, entry{l.path, []any{}})
			case redact && secret != "" && l.value.Kind() == reflect.String:
				out = append(out, entry{l.path, redactString(secret, l.value.String())})
			default:
				out = append(out, entry{l.path, l.value.Interface()})
			}
		}
	}
	add(leaves(reflect.ValueOf(c).Elem(), "", false))
	// An unset generic_api.open means a default that depends on the Redis
	// (loopback when embedded, else off): show what applies, not "".
	for i := range out {
		if out[i].path == "generic_api.open" {
			out[i].value = c.OpenMode()
		}
	}
	tiers, err := json.Marshal(c.Allocator.Tiers)
	if err != nil {
		tiers = []byte(err.Error())
	}
	return append(out, entry{"tiers", string(tiers)})
}

// flatten is entries as a map, secrets hidden.
func flatten(c *Config) map[string]string {
	m := make(map[string]string)
	for _, e := range entries(c, true) {
		m[e.path] = fmt.Sprint(e.value)
	}
	return m
}

// changedKeys lists the keys whose values differ between a and b, secrets
// included (by name only).
func changedKeys(a, b *Config) []string {
	before := make(map[string]any)
	for _, e := range entries(a, false) {
		before[e.path] = e.value
	}
	var out []string
	for _, e := range entries(b, false) {
		if v, ok := before[e.path]; !ok || !reflect.DeepEqual(v, e.value) {
			out = append(out, e.path)
		}
		delete(before, e.path)
	}
	for path := range before {
		out = append(out, path) // a list got shorter
	}
	return out
}

// String renders c as "key: value" lines, secrets hidden: for
// `edge check-config` and debugging.
func (c *Config) String() string {
	var b strings.Builder
	for _, e := range entries(c, true) {
		fmt.Fprintf(&b, "%s: %s\n", e.path, confcheck.Show(e.value))
	}
	return b.String()
}

// LogValue makes slog log c as a group of its keys, secrets hidden, so that
// logging the effective config at start is one attribute.
func (c *Config) LogValue() slog.Value {
	es := entries(c, true)
	attrs := make([]slog.Attr, 0, len(es))
	for _, e := range es {
		v := e.value
		if d, ok := v.(time.Duration); ok {
			v = d.String()
		}
		attrs = append(attrs, slog.Any(e.path, v))
	}
	return slog.GroupValue(attrs...)
}

// Entry is one key of the effective configuration and its value, secrets
// hidden: a string, number, bool, list, map or (tiers) JSON object;
// durations as Go writes them ("1m30s").
type Entry struct {
	Key   string
	Value any
}

// Effective is the configuration as a running edge applies it, key by
// key in the order of the file's sections, secrets hidden (the admin
// API's GET /api/v1/config, `edge admin config`). It encodes to one JSON
// object whose keys keep that order.
type Effective []Entry

// Effective lists c's keys in field order, secrets hidden, each plugin's
// keys under its name (providers.plugins.twilio.path).
func (c *Config) Effective() Effective {
	es := entries(c, true)
	out := make(Effective, 0, len(es))
	for _, e := range es {
		v := e.value
		switch x := v.(type) {
		case time.Duration:
			v = x.String()
		case fmt.Stringer:
			// Typed strings that hide themselves (providers.Secret) and
			// others with a text form (netip.Prefix lists are not
			// Stringers and encode as text already).
			v = x.String()
		}
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Map && rv.IsNil() {
			v = map[string]any{} // {} rather than null: an empty section
		}
		if e.path == "tiers" {
			v = json.RawMessage(e.value.(string))
		}
		out = append(out, Entry{e.path, v})
	}
	return out
}

// MarshalJSON writes the entries as one object, in their order.
func (e Effective) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, en := range e {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(en.Key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(en.Value)
		if err != nil {
			return nil, fmt.Errorf("config key %s: %w", en.Key, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// redactString hides a secret: all of it, or for kind "url" the password.
func redactString(kind, s string) string {
	if s == "" {
		return ""
	}
	if kind == "url" {
		if u, err := url.Parse(s); err == nil {
			return u.Redacted()
		}
	}
	return confcheck.Redacted
}

// restartFields calls fn for every restart-only key whose value differs
// between old and next.
func restartFields(old, next *Config, fn func(path string, o, n reflect.Value)) {
	o := leaves(reflect.ValueOf(old).Elem(), "", false)
	n := leaves(reflect.ValueOf(next).Elem(), "", false)
	for i := range o {
		if o[i].restart && !reflect.DeepEqual(o[i].value.Interface(), n[i].value.Interface()) {
			fn(o[i].path, o[i].value, n[i].value)
		}
	}
}

// RestartChanges lists the keys of restart-only fields that differ between
// old and next: what a running edge cannot apply.
func RestartChanges(old, next *Config) []string {
	var paths []string
	restartFields(old, next, func(path string, _, _ reflect.Value) {
		paths = append(paths, path)
	})
	return paths
}

// keepRestartFields copies old's restart-only values into next, so next is
// what the running edge can become (call next.link after).
func keepRestartFields(old, next *Config) {
	restartFields(old, next, func(_ string, o, n reflect.Value) { n.Set(o) })
}
