package plugins_test

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"net/url"
	"testing"

	"github.com/edge-voice/edge/plugins"
)

func TestTemplateRendersWhatTheEncoderWould(t *testing.T) {
	type doc struct {
		XMLName xml.Name `xml:"R"`
		URL     string   `xml:"u,attr"`
		Pod     string   `xml:"P"`
		Pool    string   `xml:"Q"`
	}
	xmlAnswer := func(a plugins.Allocation) (*plugins.Response, error) {
		return plugins.XMLAnswer(200, doc{URL: a.WSURL, Pod: a.PodName, Pool: a.SourcePool})
	}
	jsonAnswer := func(a plugins.Allocation) (*plugins.Response, error) {
		return plugins.JSONAnswer(200, map[string]string{"url": a.WSURL, "call": a.CallID})
	}
	a := plugins.Allocation{CallID: `c"1`, PodName: "p<0>", SourcePool: "pool:&x", WSURL: `wss://h/ws?a=1&b='2'"<>` + "\u2028"}
	for name, tc := range map[string]struct {
		escape plugins.Escape
		render func(plugins.Allocation) (*plugins.Response, error)
	}{
		"xml":  {plugins.EscapeXML, xmlAnswer},
		"json": {plugins.EscapeJSON, jsonAnswer},
	} {
		t.Run(name, func(t *testing.T) {
			tmpl, err := plugins.NewTemplate(tc.escape, tc.render)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Render(a)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := tc.render(a)
			if string(got.Body) != string(want.Body) || got.ContentType != want.ContentType || got.Status != want.Status {
				t.Errorf("template:\n%s\nencoder:\n%s", got.Body, want.Body)
			}
		})
	}
}

func TestTemplateRefusesRawSlots(t *testing.T) {
	tmpl := &plugins.Template{Status: 200, Parts: []plugins.Part{{Slot: plugins.SlotWSURL}}}
	if _, err := tmpl.Render(plugins.Allocation{WSURL: "<x>"}); !errors.Is(err, plugins.ErrBadTemplate) {
		t.Errorf("Render of an unescaped slot: %v, want ErrBadTemplate", err)
	}
}

func TestURLPortVariants(t *testing.T) {
	for in, want := range map[string][2]string{
		"https://h.example/a?b=1":  {"https://h.example/a?b=1", "https://h.example:443/a?b=1"},
		"http://h.example:80/a":    {"http://h.example:80/a", "http://h.example/a"},
		"https://[::1]:443/a":      {"https://[::1]:443/a", "https://[::1]/a"},
		"https://h.example:8443/a": {"https://h.example:8443/a", ""},
	} {
		got := plugins.URLPortVariants(in)
		if got[0] != want[0] || (want[1] == "" && len(got) != 1) || (want[1] != "" && (len(got) != 2 || got[1] != want[1])) {
			t.Errorf("URLPortVariants(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzParseForm: the strict form parser never panics, and what it accepts
// survives an encode/parse round trip unchanged.
func FuzzParseForm(f *testing.F) {
	for _, s := range []string{"CallSid=CA1&From=%2B1", "a=1;b=2", "%zz", "a=&=b&&", "x=%E2%80%A8"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		v, err := plugins.ParseForm(body)
		if err != nil {
			return
		}
		again, err := url.ParseQuery(v.Encode())
		if err != nil {
			t.Fatalf("re-parse: %v", err)
		}
		a, _ := json.Marshal(v)
		b, _ := json.Marshal(again)
		if string(a) != string(b) {
			t.Fatalf("round trip changed %s into %s", a, b)
		}
	})
}
