package exotel_test

import (
	"bytes"
	"context"
	"mime/multipart"
	"net/url"
	"testing"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/plugins/exotel"
)

func statusReq(contentType, body, auth, ip string) *plugins.Request {
	r := post(body, auth, ip)
	r.Route, r.URL, r.RawQuery = exotel.RouteStatus, "https://edge.example.com/api/v1/exotel/status", ""
	r.Header.Set("Content-Type", contentType)
	return r
}

func multipartBody(t *testing.T, fields ...string) (string, string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for i := 0; i+1 < len(fields); i += 2 {
		if err := w.WriteField(fields[i], fields[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	return w.FormDataContentType(), b.String()
}

// A terminal status ends the call in every content type Exotel sends; an
// "answered" event and a live status do not; an unauthenticated callback
// is refused.
func TestStatusCallbackEvents(t *testing.T) {
	ctx := context.Background()
	p := exotel.New()
	if _, err := p.Configure(ctx, plugins.Settings{exotel.SettingAuthTokens: creds, exotel.SettingAllowIPs: "203.0.113.0/24"}); err != nil {
		t.Fatal(err)
	}
	const sid = "80bfbec2d78bbbf10fb851f4fa165211"
	mpType, mpBody := multipartBody(t, "CallSid", sid, "Status", "busy", "RecordingUrl", "")
	form := url.Values{"CallSid": {sid}, "Status": {"no-answer"}}.Encode()
	cases := map[string]struct {
		ctype, body string
		ended       string
	}{
		"json completed": {"application/json", `{"CallSid":"` + sid + `","Status":"completed","ConversationDuration":320,"Legs":[{"Status":"completed"}]}`, "completed"},
		"json terminal":  {"application/json; charset=utf-8", `{"CallSid":"` + sid + `","Status":"failed","EventType":"terminal"}`, "failed"},
		"json answered":  {"application/json", `{"CallSid":"` + sid + `","Status":"completed","EventType":"answered"}`, ""},
		"json live":      {"application/json", `{"CallSid":"` + sid + `","Status":"in-progress"}`, ""},
		"multipart busy": {mpType, mpBody, "busy"},
		"form no-answer": {"application/x-www-form-urlencoded", form, "no-answer"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			res, err := p.Webhook(ctx, statusReq(c.ctype, c.body, basic(creds), "203.0.113.9"))
			if err != nil || res.Answer == nil || res.Answer.Status != 200 {
				t.Fatalf("result = %+v, %v; want 200", res, err)
			}
			got := ""
			if res.Ended != nil {
				got = res.Ended.Event
			}
			if got != c.ended {
				t.Errorf("ended = %q, want %q", got, c.ended)
			}
		})
	}
	body := `{"CallSid":"` + sid + `","Status":"completed"}`
	for name, req := range map[string]*plugins.Request{
		"no credentials":  statusReq("application/json", body, "", "203.0.113.9"),
		"outside allowed": statusReq("application/json", body, basic(creds), "192.0.2.1"),
	} {
		if res, err := p.Webhook(ctx, req); err != nil || res.Answer == nil || res.Answer.Status < 400 || res.Ended != nil {
			t.Errorf("%s: %+v, %v; want a refusal and no end", name, res, err)
		}
	}
	if res, err := p.Webhook(ctx, statusReq("application/json", "{", basic(creds), "203.0.113.9")); err != nil || res.Answer.Status != 400 {
		t.Errorf("malformed JSON: %+v, %v; want 400", res, err)
	}
	if res, err := p.Webhook(ctx, statusReq("multipart/form-data", "x", basic(creds), "203.0.113.9")); err != nil || res.Answer.Status != 400 {
		t.Errorf("multipart without a boundary: %+v, %v; want 400", res, err)
	}
}
