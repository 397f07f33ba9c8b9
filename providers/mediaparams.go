package providers

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/proxy/mediaurl"
)

// mediaParams are the media URL query parameters a plugin declared
// (plugins.Description.MediaParams), checked when it starts: the only ones
// its webhooks may put on a call's media URL.
type mediaParams map[string]paramRule

// paramRule is one declared parameter's allowed values.
type paramRule struct {
	values  []string
	pattern *regexp.Regexp // nil: only values
}

func (r paramRule) allows(v string) bool {
	return mediaurl.ValidParamValue(v) && (slices.Contains(r.values, v) || r.pattern != nil && r.pattern.MatchString(v))
}

// compileMediaParams checks a plugin's declaration: names and values a
// media URL can carry without escapes, patterns that compile, no name
// twice, at most mediaurl.MaxParams.
func compileMediaParams(ds []plugins.MediaParam) (mediaParams, error) {
	if len(ds) > mediaurl.MaxParams {
		return nil, fmt.Errorf("media parameters: %d declared, at most %d", len(ds), mediaurl.MaxParams)
	}
	out := mediaParams{}
	for _, d := range ds {
		if !mediaurl.ValidParamName(d.Name) {
			return nil, fmt.Errorf("media parameter name %q: want [A-Za-z0-9_.-], at most 32 bytes", d.Name)
		}
		if _, dup := out[d.Name]; dup {
			return nil, fmt.Errorf("media parameter %q declared twice", d.Name)
		}
		r := paramRule{values: d.Values}
		for _, v := range d.Values {
			if !mediaurl.ValidParamValue(v) {
				return nil, fmt.Errorf("media parameter %s: value %q cannot be carried in a media URL", d.Name, v)
			}
		}
		if d.Pattern != "" {
			re, err := regexp.Compile(`^(?:` + d.Pattern + `)$`)
			if err != nil {
				return nil, fmt.Errorf("media parameter %s: pattern: %w", d.Name, err)
			}
			r.pattern = re
		}
		if len(r.values) == 0 && r.pattern == nil {
			return nil, fmt.Errorf("media parameter %s: no values and no pattern: nothing would be allowed", d.Name)
		}
		out[d.Name] = r
	}
	return out, nil
}

// query checks the parameters a webhook asked for against the declaration
// and returns the media URL's signed query ("" for none).
func (m mediaParams) query(asked map[string]string) (string, error) {
	for n, v := range asked {
		r, ok := m[n]
		if !ok {
			return "", fmt.Errorf("media parameter %q was not declared", n)
		}
		if !r.allows(v) {
			return "", fmt.Errorf("media parameter %s: value %q is not one the plugin declared", n, v)
		}
	}
	return mediaurl.EncodeQuery(asked)
}
