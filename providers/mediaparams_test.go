package providers_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/plugins/exotel"
	"github.com/edge-voice/edge/providers"
	"github.com/edge-voice/edge/proxy/mediaurl"
)

// Exotel's plugin process puts the configured sample rate on the stream
// URL it answers (per merchant, else the default), and the URL's token
// covers it: the media proxy admits that URL only with that query.
func TestExotelStreamURLCarriesTheSampleRate(t *testing.T) {
	e := newEnv(t, spec("exotel", plugins.Settings{
		exotel.SettingSampleRate: "16000", exotel.SettingSampleRateByMerchant: "hd=24000, narrow=8000"}))
	e.register(t, "basic", "voice-agent-0")
	signer := mediaurl.NewSigner([]byte("test-secret"), time.Minute)
	for _, tc := range []struct{ how, path, body, rate string }{
		{"voicebot lookup, default rate", "/providers/exotel/voicebot?CallSid=ex-1&merchant_id=acme", "", "16000"},
		{"voicebot lookup, the merchant's rate", "/providers/exotel/voicebot?CallSid=ex-2&merchant_id=hd", "", "24000"},
		{"JSON webhook, the merchant's rate", "/api/v1/exotel/allocate?merchant_id=narrow", `{"CallSid":"ex-3"}`, "8000"},
	} {
		t.Run(tc.how, func(t *testing.T) {
			method := "GET"
			if tc.body != "" {
				method = "POST"
			}
			got := e.do(t, method, tc.path, tc.body)
			var ans struct{ URL string }
			if err := json.Unmarshal([]byte(got.body), &ans); err != nil || got.status != 200 {
				t.Fatalf("answer %+v: %v", got, err)
			}
			path, query, _ := strings.Cut(strings.TrimPrefix(ans.URL, "wss://edge.example.com"), "?")
			if query != "sample-rate="+tc.rate {
				t.Fatalf("stream URL %s: query %q, want sample-rate=%s", ans.URL, query, tc.rate)
			}
			tg, err := mediaurl.ParseTarget(path, query)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := signer.VerifyTarget(&tg); err != nil || !tg.Signed {
				t.Errorf("the URL's token: %v, signed %v; want it to cover the query", err, tg.Signed)
			}
		})
	}
}

// Sample rate settings Exotel cannot stream at are refused by the plugin
// process's dry run, naming the key: edge check-config and reloads say
// what is wrong before a call gets a URL Exotel would refuse.
func TestExotelSampleRateSettingsRefused(t *testing.T) {
	for _, tc := range []struct{ key, value, says string }{
		{exotel.SettingSampleRate, "44100", `"44100" is not a sample rate Exotel streams at (8000, 16000, 24000)`},
		{exotel.SettingSampleRate, "16k", `"16k" is not a sample rate`},
		{exotel.SettingSampleRateByMerchant, "acme:16000", `"acme:16000" is not merchant=rate`},
		{exotel.SettingSampleRateByMerchant, "acme=11025", `"11025" is not a sample rate`},
		{exotel.SettingSampleRateByMerchant, "a/b=16000", `"a/b=16000" is not merchant=rate`},
		{exotel.SettingSampleRateByMerchant, "acme=16000,acme=8000", `merchant "acme" is listed twice`},
	} {
		_, err := providers.ValidateSpec(context.Background(), spec("exotel", plugins.Settings{tc.key: tc.value}), nil, 30*time.Second)
		bad := plugins.InvalidSettings(err)
		if !errors.Is(err, plugins.ErrInvalidSettings) || len(bad) != 1 || bad[0].Key != tc.key || !strings.Contains(bad[0].Reason, tc.says) {
			t.Errorf("%s: %q: %v, want %s refused: %s", tc.key, tc.value, err, tc.key, tc.says)
		}
	}
}

// The host puts on a media URL only parameters the plugin declared, with
// values it allows: anything else is the plugin's error (500) and no pod
// is taken.
func TestHostRefusesUndeclaredMediaParams(t *testing.T) {
	e := newEnv(t, spec("testprov", nil))
	e.register(t, "gold", "voice-agent-0")
	for name, query := range map[string]string{
		"undeclared":            "evil=1",
		"not in the closed set": "rate=3",
		"not the pattern":       "tag=ABC",
		"an escape":             "tag=a%2Fb",
		"a traversal":           "tag=..",
		"too long":              "tag=" + strings.Repeat("a", 65),
	} {
		got := e.do(t, "POST", "/api/v1/testprov/allocate", "params=tp-bad?"+query)
		if got.status != 500 || !strings.Contains(got.body, "plugin_error") {
			t.Errorf("%s (%s): %+v, want 500 plugin_error", name, query, got)
		}
	}
	if owner := e.snapshot(t)["voice-agent-0"]; owner != "" {
		t.Errorf("a refused parameter took the pod (%q)", owner)
	}
	got := e.do(t, "POST", "/api/v1/testprov/allocate", "params=tp-1?tag=abc&rate=2")
	var ans struct{ WS string }
	if err := json.Unmarshal([]byte(got.body), &ans); err != nil || got.status != 200 || !strings.HasSuffix(ans.WS, "?rate=2&tag=abc") {
		t.Errorf("declared parameters: %+v, want the URL to end in ?rate=2&tag=abc", got)
	}
}
