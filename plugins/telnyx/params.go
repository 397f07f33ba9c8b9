package telnyx

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/url"

	"github.com/edge-voice/edge/plugins"
)

// params reads a webhook's parameters. TeXML sends them as a form
// (application/x-www-form-urlencoded, as Telnyx's TeXML callback reference
// gives them); a JSON object of the same names is read too. Either way the
// signature covered the raw bytes, so the format changes nothing about
// what was signed. Only string values are kept: numbers and booleans
// (SequenceNumber, ShakenStirValidated) are not read by edge.
func params(contentType string, body []byte) (url.Values, error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt != "application/json" {
		return plugins.ParseForm(body)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, fmt.Errorf("%w: JSON body is not an object", plugins.ErrMalformed)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: JSON body holds more than one value", plugins.ErrMalformed)
	}
	v := url.Values{}
	for k, raw := range obj {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			v.Set(k, s)
		}
	}
	return v, nil
}
