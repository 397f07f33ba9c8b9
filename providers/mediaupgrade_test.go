package providers

import (
	"slices"
	"strings"
	"testing"
)

// A plugin declares which of a client's upgrade headers and subprotocols
// its pods read; edge keeps them canonical and refuses a declaration that
// would let a client set what edge writes itself.
func TestCheckMediaUpgrade(t *testing.T) {
	got, err := checkMediaUpgrade([]string{"x-twilio-signature", "X-Vendor-Key"}, []string{"audio.v1"})
	if err != nil || !slices.Equal(got.Headers, []string{"X-Twilio-Signature", "X-Vendor-Key"}) || !slices.Equal(got.Subprotocols, []string{"audio.v1"}) {
		t.Fatalf("check = %+v, %v", got, err)
	}
	for name, tc := range map[string]struct{ headers, protocols []string }{
		"upgrade's own":      {headers: []string{"Sec-WebSocket-Extensions"}},
		"key":                {headers: []string{"sec-websocket-key"}},
		"host":               {headers: []string{"Host"}},
		"hop-by-hop":         {headers: []string{"Connection"}},
		"forwarding":         {headers: []string{"X-Forwarded-For"}},
		"edge's params":      {headers: []string{"Edge-Media-Params"}},
		"edge's resumed":     {headers: []string{"edge-resumed"}},
		"trace context":      {headers: []string{"traceparent"}},
		"not a token":        {headers: []string{"X Bad"}},
		"empty":              {headers: []string{""}},
		"twice":              {headers: []string{"X-A", "x-a"}},
		"too many":           {headers: strings.Split("A,B,C,D,E,F,G,H,I", ",")},
		"subprotocol token":  {protocols: []string{"a,b"}},
		"subprotocol twice":  {protocols: []string{"v1", "v1"}},
		"too many protocols": {protocols: strings.Split("a,b,c,d,e,f,g,h,i", ",")},
		"long header":        {headers: []string{strings.Repeat("x", 65)}},
		"long subprotocol":   {protocols: []string{strings.Repeat("p", 65)}},
	} {
		if _, err := checkMediaUpgrade(tc.headers, tc.protocols); err == nil {
			t.Errorf("%s: %v %v accepted", name, tc.headers, tc.protocols)
		}
	}
}
