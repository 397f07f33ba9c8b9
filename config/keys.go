package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edge-voice/edge/providers"
)

var durationType = reflect.TypeFor[time.Duration]()

// keyShape is what a known key accepts below itself.
type keyShape int

const (
	leafKey keyShape = iota // the key only
	openKey                 // the key and any path below it (maps, raw values)
)

// knownKeys lists every key of Config, read from its koanf tags, plus the
// raw keys the allocator parses.
var knownKeys = sync.OnceValue(func() map[string]keyShape {
	keys := map[string]keyShape{"tiers": leafKey, "default_chain": leafKey}
	for _, l := range leaves(reflect.ValueOf(&Config{}).Elem(), "", false) {
		keys[l.path] = leafKey
		if l.value.Kind() == reflect.Map {
			keys[l.path] = openKey
		}
	}
	return keys
})

// knownKey reports whether key (dotted, lower-case) names a setting.
func knownKey(key string) bool {
	keys := knownKeys()
	if _, ok := keys[key]; ok {
		return true
	}
	for i := strings.LastIndexByte(key, '.'); i > 0; i = strings.LastIndexByte(key[:i], '.') {
		if shape, ok := keys[key[:i]]; ok && shape == openKey {
			return true
		}
	}
	return false
}

// durationHook decodes Go duration strings and refuses bare numbers: in
// YAML "lease_ttl: 60" would otherwise be 60ns.
func durationHook(from, to reflect.Type, data any) (any, error) {
	if to != durationType {
		return data, nil
	}
	switch from.Kind() {
	case reflect.String:
		s := strings.TrimSpace(data.(string))
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a duration such as \"30s\" or \"6m\"", s)
		}
		return d, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		if reflect.ValueOf(data).IsZero() {
			return time.Duration(0), nil
		}
		return nil, fmt.Errorf("%v has no unit: write a duration such as \"%vs\"", data, data)
	}
	return data, nil
}

// numberHook parses numbers and booleans given as strings (as the
// environment and flags give every value), with an error that shows the
// value (mapstructure's own does not).
func numberHook(from, to reflect.Type, data any) (any, error) {
	if from.Kind() != reflect.String || to == durationType {
		return data, nil
	}
	s := strings.TrimSpace(data.(string))
	var v any
	var err error
	var want string
	switch to.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v, err = strconv.ParseInt(s, 10, to.Bits())
		want = "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v, err = strconv.ParseUint(s, 10, to.Bits())
		want = "a whole number >= 0"
	case reflect.Bool:
		v, err = strconv.ParseBool(s)
		want = "true or false"
	default:
		return data, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%q is not %s", s, want)
	}
	return v, nil
}

// jsonHook decodes a string holding JSON into a list, map or struct field:
// how the environment and --set give pods.static and the like. An empty
// string is an empty list or map.
// tokensHook takes a list where a comma-separated token string is kept
// (providers.Tokens: auth_tokens): a YAML list, or a JSON list given as
// one string as --set and the environment give lists (a value starting
// with "[": no provider's token does).
func tokensHook(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeFor[providers.Tokens]() {
		return data, nil
	}
	switch from.Kind() {
	case reflect.Slice:
		list, ok := data.([]any)
		if !ok {
			return data, nil
		}
		return providers.TokensFromList(list)
	case reflect.String:
		s := strings.TrimSpace(data.(string))
		if !strings.HasPrefix(s, "[") {
			return data, nil
		}
		var list []any
		if err := json.Unmarshal([]byte(s), &list); err != nil {
			return nil, fmt.Errorf("not a JSON list of tokens: %v", err)
		}
		return providers.TokensFromList(list)
	}
	return data, nil
}

func jsonHook(from, to reflect.Type, data any) (any, error) {
	if from.Kind() != reflect.String {
		return data, nil
	}
	switch to.Kind() {
	case reflect.Slice, reflect.Map, reflect.Struct:
	default:
		return data, nil
	}
	s := strings.TrimSpace(data.(string))
	switch {
	case s == "" && to.Kind() == reflect.Slice:
		return []any{}, nil
	case s == "":
		return map[string]any{}, nil
	case s[0] != '[' && s[0] != '{':
		return data, nil
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	return v, nil
}
