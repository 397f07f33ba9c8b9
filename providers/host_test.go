package providers_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/edge-voice/edge/plugins"
)

const twilioToken = "twilio-token-0123456789"

// twilioSign is Twilio's documented algorithm (see plugins/twilio tests).
func twilioSign(fullURL string, form url.Values) string {
	names := make([]string, 0, len(form))
	for n := range form {
		names = append(names, n)
	}
	sort.Strings(names)
	s := fullURL
	for _, n := range names {
		s += n + form.Get(n)
	}
	mac := hmac.New(sha1.New, []byte(twilioToken))
	mac.Write([]byte(s))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func twilioEnv(t *testing.T) *env {
	e := newEnv(t, spec("twilio", plugins.Settings{"auth_tokens": twilioToken}), spec("exotel", nil), spec("testprov", plugins.Settings{"greeting": "hi"}))
	e.register(t, "gold", "voice-agent-0")
	e.register(t, "basic", "voice-agent-shared")
	return e
}

const twilioPath = "/api/v1/twilio/allocate?merchant_id=acme&flow=v2"

func signedTwilio(t *testing.T, e *env, callSid string) answer {
	form := url.Values{"CallSid": {callSid}, "From": {"+15550100"}}
	return e.do(t, "POST", twilioPath, form.Encode(), "X-Twilio-Signature", twilioSign("https://edge.example.com"+twilioPath, form))
}

func TestTwilioWebhookAllocatesAndRetriesAnswerTheSame(t *testing.T) {
	e := twilioEnv(t)
	first := signedTwilio(t, e, "CA00000000000000000000000000000001")
	first.body = withoutToken(first.body)
	if first.status != 200 || first.ctype != "text/xml" ||
		!strings.Contains(first.body, `<Stream url="wss://edge.example.com/ws/pod/voice-agent-0/agent/voice/breeze-buddy/twilio/callback/order-confirmation/v2" statusCallback="https://edge.example.com/api/v1/twilio/status" statusCallbackMethod="POST">`) ||
		!strings.Contains(first.body, `<Parameter name="merchant_id" value="acme">`) {
		t.Fatalf("answer %+v", first)
	}
	if again := signedTwilio(t, e, "CA00000000000000000000000000000001"); withoutToken(again.body) != first.body || again.status != first.status {
		t.Errorf("retry answered\n%+v\nfirst answer was\n%+v", again, first)
	}
	if n, _ := e.rdb.Exists(context.Background(), "voice:call:CA00000000000000000000000000000001").Result(); n != 1 {
		t.Errorf("no call info in Redis for CA00000000000000000000000000000001")
	}
	// One RPC per webhook: the answer came from the plugin's template.
	webhook := metric(t, e, "edge_plugin_rpc_duration_seconds", "plugin", "twilio", "method", "Webhook")
	answer := metric(t, e, "edge_plugin_rpc_duration_seconds", "plugin", "twilio", "method", "Answer")
	if webhook != 2 || answer != 0 {
		t.Errorf("RPCs: %v Webhook, %v Answer; want 2 and 0", webhook, answer)
	}
	if got := metric(t, e, "edge_provider_webhooks_total", "provider", "twilio", "outcome", "allocated"); got != 2 {
		t.Errorf("allocated webhooks = %v, want 2", got)
	}
}

// metric reads one sample of the host's registry (0 when absent).
func metric(t testing.TB, e *env, name string, labels ...string) float64 {
	t.Helper()
	families, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue next
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

func TestRejectedWebhooksChangeNothingInRedis(t *testing.T) {
	e := twilioEnv(t)
	form := url.Values{"CallSid": {"CA00000000000000000000000000000002"}}
	before := e.snapshot(t)
	for name, tc := range map[string]struct {
		method, path, body string
		header             []string
		status             int
	}{
		"forged signature":   {"POST", twilioPath, form.Encode(), []string{"X-Twilio-Signature", twilioSign("https://evil.example.com"+twilioPath, form)}, 403},
		"no signature":       {"POST", twilioPath, form.Encode(), nil, 403},
		"signed, no CallSid": {"POST", twilioPath, "From=1", []string{"X-Twilio-Signature", twilioSign("https://edge.example.com"+twilioPath, url.Values{"From": {"1"}})}, 400},
		"malformed form":     {"POST", twilioPath, "CallSid=%zz", nil, 400},
		"body too large":     {"POST", twilioPath, "CallSid=" + strings.Repeat("a", 70<<10), nil, 413},
		"unknown provider":   {"POST", "/api/v1/nope/allocate", form.Encode(), nil, 404},
		"undeclared route":   {"POST", "/providers/twilio/nope", form.Encode(), nil, 404},
		"exotel bad json":    {"POST", "/api/v1/exotel/allocate", `{"CallSid":`, nil, 400},
		"exotel no callsid":  {"GET", "/providers/exotel/voicebot?From=1", "", nil, 400},
		"bad merchant id":    {"POST", "/api/v1/exotel/allocate?merchant_id=a:b", `{"CallSid":"ex-9"}`, nil, 400},
	} {
		t.Run(name, func(t *testing.T) {
			if got := e.do(t, tc.method, tc.path, tc.body, tc.header...); got.status != tc.status {
				t.Errorf("status %d, want %d: %s", got.status, tc.status, got.body)
			}
		})
	}
	if after := e.snapshot(t); !reflect.DeepEqual(before, after) {
		t.Errorf("Redis changed:\nbefore %v\nafter  %v", keysOf(before), keysOf(after))
	}
}

func keysOf(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestExotelVoicebotLookupAndNoCapacity(t *testing.T) {
	e := newEnv(t, spec("exotel", nil), spec("twilio", nil))
	// No pods registered: edge cannot serve, so each provider is sent to
	// the number's fallback URL (a non-2xx answer), not told to hang up.
	got := e.do(t, "GET", "/providers/exotel/voicebot?CallSid=ex-1&merchant_id=acme", "")
	if got.status != 503 || !strings.Contains(got.body, `"code":"no_pods"`) {
		t.Errorf("exotel without pods: %+v", got)
	}
	got = e.do(t, "POST", "/api/v1/twilio/allocate", "CallSid=CA00000000000000000000000000000003")
	if got.status != 503 || strings.Contains(got.body, "<Say>") {
		t.Errorf("twilio without pods: %+v, want 503 for the fallback URL", got)
	}
	if n := metric(t, e, "edge_provider_webhooks_total", "provider", "twilio", "outcome", "no_pods"); n != 1 {
		t.Errorf("no_pods outcomes = %v, want 1", n)
	}
	e.register(t, "gold", "voice-agent-0")
	got = e.do(t, "GET", "/providers/exotel/voicebot?CallSid=ex-1&merchant_id=acme", "")
	want := `{"url":"wss://edge.example.com/ws/pod/voice-agent-0/agent/voice/breeze-buddy/exotel/callback/template/v2"}` + "\n"
	if got.status != 200 || withoutToken(got.body) != want {
		t.Errorf("exotel lookup: %+v, want %s", got, want)
	}
}

func TestPluginWithoutTemplateAndPluginLogs(t *testing.T) {
	e := twilioEnv(t)
	// Plugin logs reach the host's log under the plugin's name.
	e.logs.waitFor(t, "testprov configured", "plugin=testprov", "greeting=hi")
	got := e.do(t, "POST", "/api/v1/testprov/allocate", "call=tp-1")
	if got.status != 200 || !strings.Contains(got.body, `"pod":"voice-agent-0"`) {
		t.Errorf("answer %+v", got)
	}
	if n := metric(t, e, "edge_plugin_rpc_duration_seconds", "plugin", "testprov", "method", "Answer"); n != 1 {
		t.Errorf("Answer RPCs = %v, want 1", n)
	}
	if got := e.do(t, "POST", "/providers/testprov/x", ""); got.status != 404 {
		t.Errorf("undeclared route: %+v", got)
	}
	if got := e.do(t, "POST", "/api/v1/testprov/allocate", "tea"); got.status != 418 {
		t.Errorf("direct answer: %+v", got)
	}
}

func TestRPCDeadlineAnswers503(t *testing.T) {
	e := newEnv(t, spec("testprov", nil))
	got := e.do(t, "POST", "/api/v1/testprov/allocate", "hang")
	if got.status != 503 || !strings.Contains(got.body, "provider_unavailable") {
		t.Errorf("hung RPC: %+v", got)
	}
	if n := metric(t, e, "edge_plugin_rpc_errors_total", "plugin", "testprov", "method", "Webhook"); n != 1 {
		t.Errorf("rpc errors = %v, want 1", n)
	}
}

func TestKilledPluginIsRestartedAndServesAgain(t *testing.T) {
	e := twilioEnv(t)
	gen, pid := e.waitUp(t, "twilio", 0)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	gen2, pid2 := e.waitUp(t, "twilio", gen)
	if pid2 == pid {
		t.Fatalf("same pid %d after restart", pid)
	}
	if got := signedTwilio(t, e, "CA0000000000000000000000000000000a"); got.status != 200 || !strings.Contains(got.body, "<Stream") {
		t.Errorf("after restart %d: %+v", gen2, got)
	}
	if n := metric(t, e, "edge_plugin_restarts_total", "plugin", "twilio"); n < 1 {
		t.Errorf("restarts = %v", n)
	}
	// A plugin that exits in the middle of a webhook: the host answers 503
	// (never crashes) and the plugin comes back.
	if got := e.do(t, "POST", "/api/v1/testprov/allocate", "exit"); got.status != 503 {
		t.Errorf("plugin exit mid-request: %+v", got)
	}
	e.waitUp(t, "testprov", 1)
	if got := e.do(t, "POST", "/api/v1/testprov/allocate", "call=tp-2"); got.status != 200 {
		t.Errorf("after restart: %+v", got)
	}
}

func TestPluginThatCannotStartAnswers503AndFailsReadiness(t *testing.T) {
	exe, _ := os.Executable()
	f, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	io.Copy(h, f)
	f.Close()
	good := spec("twilio", nil)
	good.SHA256 = hex.EncodeToString(h.Sum(nil))
	bad := spec("plivo", nil)
	bad.SHA256 = strings.Repeat("0", 64)
	e := newEnvNoWait(t, good, bad)
	e.waitUp(t, "twilio", 0) // the checksum matched
	e.logs.waitFor(t, "failed to start", "plugin=plivo", "checksum")
	if got := e.do(t, "POST", "/api/v1/plivo/allocate", "CallUUID=00000000-0000-4000-8000-000000000001"); got.status != 503 {
		t.Errorf("plivo down: %+v", got)
	}
	if err := e.host.Check("plivo")(context.Background()); err == nil {
		t.Error("readiness passes with plivo down")
	}
	if err := e.host.Check("twilio")(context.Background()); err != nil {
		t.Errorf("twilio readiness: %v", err)
	}
}

// Settings changed while a plugin is restarting reach the process that
// comes up: one started with the older settings is configured again (a
// rotated-out auth token must not stay valid until the next restart).
func TestReconfigureDuringRestartReachesTheNewProcess(t *testing.T) {
	e := newEnv(t, spec("testprov", plugins.Settings{"greeting": "one"}))
	gen, pid := e.waitUp(t, "testprov", 0)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// go-plugin logs "plugin started" once the new process runs: the host
	// is in the middle of its start (handshake, Describe, Configure).
	e.logs.waitForNew(t, "plugin started", "plugin=testprov")
	e.host.Reconfigure(spec("testprov", plugins.Settings{"greeting": "two"}))
	e.waitUp(t, "testprov", gen)
	e.logs.waitFor(t, "testprov configured", "greeting=two")
}

// withoutToken drops the media token segment (/c.<token>) of media URLs:
// it carries an expiry, so it differs between two mints.
func withoutToken(s string) string { return mediaToken.ReplaceAllString(s, "/") }

var mediaToken = regexp.MustCompile(`/c\.[A-Za-z0-9_-]+/`)
