package exotel

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"

	"github.com/edge-voice/edge/plugins"
)

// RouteStatus is Exotel's StatusCallback: POST /api/v1/exotel/status. It is
// named where a call is created (the Calls API's StatusCallback); the
// Voicebot applet's answer ({"url": ...}) has no field for one.
const RouteStatus = "status"

// Terminal statuses of a call (Exotel's StatusCallback: the call is over).
var endingStatus = map[string]bool{"completed": true, "failed": true, "busy": true, "no-answer": true}

// statusBody is what edge reads of a status callback; Exotel sends more.
type statusBody struct {
	CallSid   string `json:"CallSid"`
	Status    string `json:"Status"`
	EventType string `json:"EventType"`
}

// statusCallback acknowledges an authenticated status callback (200, as
// Exotel asks) and reports the call ended for a terminal status. An
// "answered" event (StatusCallbackEvents) reports no end.
func statusCallback(req *plugins.Request) *plugins.WebhookResult {
	if req.Method != http.MethodPost {
		return plugins.Reject(http.StatusMethodNotAllowed, "method_not_allowed", "use POST")
	}
	b, err := parseStatus(req.Header.Get("Content-Type"), req.Body)
	if err != nil {
		return plugins.RejectBadRequest(err.Error())
	}
	ack := &plugins.WebhookResult{Answer: &plugins.Response{Status: http.StatusOK}}
	if b.CallSid != "" && endingStatus[b.Status] && b.EventType != "answered" {
		ack.Ended = &plugins.CallEnd{CallID: b.CallSid, Event: b.Status}
	}
	return ack
}

// parseStatus reads the callback in the content type the call asked for
// (StatusCallbackContentType): JSON, multipart/form-data or a URL-encoded
// form.
func parseStatus(contentType string, body []byte) (statusBody, error) {
	mt, params, _ := mime.ParseMediaType(contentType)
	switch mt {
	case "application/json":
		var b statusBody
		if err := json.Unmarshal(body, &b); err != nil {
			return statusBody{}, plugins.ErrMalformed
		}
		return b, nil
	case "multipart/form-data":
		form, err := multipartValues(body, params["boundary"])
		if err != nil {
			return statusBody{}, err
		}
		return statusBody{CallSid: form.Get("CallSid"), Status: form.Get("Status"), EventType: form.Get("EventType")}, nil
	}
	form, err := plugins.ParseForm(body)
	if err != nil {
		return statusBody{}, err
	}
	return statusBody{CallSid: form.Get("CallSid"), Status: form.Get("Status"), EventType: form.Get("EventType")}, nil
}

// maxFields bounds the parts of a multipart callback read; the body itself
// is already bounded by edge (http.max_body_bytes).
const maxFields = 64

// multipartValues reads a multipart/form-data body's fields in memory:
// parts with a file name (none are expected) are skipped, never stored.
func multipartValues(body []byte, boundary string) (url.Values, error) {
	if boundary == "" {
		return nil, plugins.ErrMalformed
	}
	r := multipart.NewReader(bytes.NewReader(body), boundary)
	out := url.Values{}
	for range maxFields {
		p, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, plugins.ErrMalformed
		}
		if p.FileName() != "" || p.FormName() == "" {
			continue
		}
		v, err := io.ReadAll(p)
		if err != nil {
			return nil, plugins.ErrMalformed
		}
		out.Add(p.FormName(), string(v))
	}
	return out, nil
}
