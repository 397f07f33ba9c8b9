package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"reflect"
	"strings"
	"time"
)

// The reflection over Config's tags lives here: restart-only fields
// (reload:"restart"), secrets (secret:"true"|"url") and the flat key=value
// view used by String, LogValue and the reload log.

const redactedText = "[redacted]"

// entry is one key of the flat view.
type entry struct {
	path  string
	value any
}

// entries flattens c into keys in field order: nested sections as
// "a.b", list items as "a[0].b", the tiers as one JSON value. With redact,
// secrets are hidden.
func entries(c *Config, redact bool) []entry {
	var out []entry
	var walk func(v reflect.Value, prefix string)
	walk = func(v reflect.Value, prefix string) {
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name := koanfName(f)
			if name == "" {
				continue
			}
			path, fv := prefix+name, v.Field(i)
			switch {
			case fv.Kind() == reflect.Struct:
				walk(fv, path+".")
			case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Struct && fv.Len() > 0:
				for j := range fv.Len() {
					walk(fv.Index(j), fmt.Sprintf("%s[%d].", path, j))
				}
			case fv.Kind() == reflect.Slice && fv.Len() == 0:
				out = append(out, entry{path, []any{}})
			case redact && f.Tag.Get("secret") != "" && fv.Kind() == reflect.String:
				out = append(out, entry{path, redactString(f.Tag.Get("secret"), fv.String())})
			default:
				out = append(out, entry{path, fv.Interface()})
			}
		}
	}
	walk(reflect.ValueOf(c).Elem(), "")
	tiers, err := json.Marshal(c.Tiers)
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
		fmt.Fprintf(&b, "%s: %s\n", e.path, show(e.value))
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

// Redacted returns a copy of c with secrets replaced, for code that prints
// the struct itself.
func (c *Config) Redacted() *Config {
	r := *c
	redactValue(reflect.ValueOf(&r).Elem())
	return &r
}

func redactValue(v reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		if !f.IsExported() {
			continue
		}
		switch {
		case f.Tag.Get("secret") != "" && fv.Kind() == reflect.String:
			fv.SetString(redactString(f.Tag.Get("secret"), fv.String()))
		case fv.Kind() == reflect.Struct:
			redactValue(fv)
		case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Struct && fv.Len() > 0:
			cp := reflect.MakeSlice(fv.Type(), fv.Len(), fv.Len())
			reflect.Copy(cp, fv) // the original's items stay untouched
			for j := range cp.Len() {
				redactValue(cp.Index(j))
			}
			fv.Set(cp)
		}
	}
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
	return redactedText
}

// restartFields calls fn for every restart-only field (tagged, or inside a
// tagged section) whose value differs between old and next, with its key.
func restartFields(old, next *Config, fn func(path string, o, n reflect.Value)) {
	var walk func(o, n reflect.Value, prefix string, restart bool)
	walk = func(o, n reflect.Value, prefix string, restart bool) {
		t := o.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name := koanfName(f)
			if name == "" {
				continue
			}
			r := restart || f.Tag.Get("reload") == "restart"
			ov, nv := o.Field(i), n.Field(i)
			switch {
			case f.Type.Kind() == reflect.Struct:
				walk(ov, nv, prefix+name+".", r)
			case r && !reflect.DeepEqual(ov.Interface(), nv.Interface()):
				fn(prefix+name, ov, nv)
			}
		}
	}
	walk(reflect.ValueOf(old).Elem(), reflect.ValueOf(next).Elem(), "", false)
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
// what the running edge can become.
func keepRestartFields(old, next *Config) {
	restartFields(old, next, func(_ string, o, n reflect.Value) { n.Set(o) })
}
