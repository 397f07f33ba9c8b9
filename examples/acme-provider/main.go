// Command acme-provider is an example third-party provider plugin for edge,
// built outside edge and loaded through its config:
//
//	go build -o /opt/edge/acme-provider ./examples/acme-provider
//
//	providers:
//	  plugins:
//	    acme:
//	      path: /opt/edge/acme-provider
//	      sha256: <sha256sum of the binary>
//	      secrets: {signing_key: <shared with Acme>}
//
// "Acme" POSTs JSON {"call_id": "...", "merchant": "..."} to
// /api/v1/acme/allocate with X-Acme-Signature: hex(HMAC-SHA256(signing_key,
// body)) and expects {"stream_url": "wss://..."}; when a call ends it POSTs
// {"call_id": "...", "event": "hangup"} to /api/v1/acme/status, signed the
// same way, and edge ends the call at once. It imports only the contract
// package, as any third-party provider would. See docs/plugins.md.
package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"github.com/edge-voice/edge/plugins"
)

func main() { plugins.Serve(newAcme()) }

// acme is the provider. Settings arrive with Configure, possibly again at
// run time; plugins.Parsed swaps them whole and gives edge the dry run
// (ValidateSettings) from the same parse function, so a bad key is refused
// by `edge check-config` and by a reload without touching the running one.
type acme struct {
	*plugins.Parsed[acmeSettings]
}

type acmeSettings struct{ key []byte }

// minKeyLen refuses keys too short to be worth an HMAC.
const minKeyLen = 16

func newAcme() *acme { return &acme{plugins.NewParsed(&acmeSettings{}, parseSettings)} }

func parseSettings(s plugins.Settings) (*acmeSettings, plugins.Configured, error) {
	key := []byte(s["signing_key"])
	if len(key) > 0 && len(key) < minKeyLen {
		// The reason never holds the value: it is a secret.
		return nil, plugins.Configured{}, &plugins.InvalidSetting{Key: "signing_key", Reason: "shorter than 16 bytes"}
	}
	return &acmeSettings{key: key}, plugins.Configured{Verifies: len(key) > 0}, nil
}

func (a *acme) Describe(context.Context) (plugins.Description, error) {
	return plugins.Description{Name: "acme", Routes: []plugins.Route{{Method: http.MethodPost, Path: "status"}}}, nil
}

type webhook struct {
	CallID   string `json:"call_id"`
	Merchant string `json:"merchant"`
	Event    string `json:"event"` // status callbacks only
}

func (a *acme) Webhook(_ context.Context, req *plugins.Request) (*plugins.WebhookResult, error) {
	// Verify first: a rejected webhook must change nothing.
	if key := a.Current().key; len(key) > 0 {
		mac := hmac.New(sha256.New, key)
		mac.Write(req.Body)
		want := hex.EncodeToString(mac.Sum(nil))
		if !plugins.EqualMAC([]byte(want), []byte(req.Header.Get("X-Acme-Signature"))) {
			return plugins.RejectForbidden("bad X-Acme-Signature"), nil
		}
	}
	var w webhook
	if err := json.Unmarshal(req.Body, &w); err != nil {
		return plugins.RejectBadRequest("body is not JSON"), nil
	}
	if w.CallID == "" {
		return plugins.RejectBadRequest("call_id is missing"), nil
	}
	if req.Route == "status" {
		// A verified status callback: acknowledge it, and report the call
		// ended when Acme says it hung up (edge releases it at once if its
		// media socket never opened).
		ack := &plugins.WebhookResult{Answer: &plugins.Response{Status: http.StatusNoContent}}
		if w.Event == "hangup" {
			ack.Ended = &plugins.CallEnd{CallID: w.CallID, Event: "hangup"}
		}
		return ack, nil
	}
	// The template lets edge answer a success without a second RPC.
	tmpl, err := plugins.NewTemplate(plugins.EscapeJSON, answer)
	if err != nil {
		return nil, err
	}
	return &plugins.WebhookResult{
		Allocate: &plugins.AllocationRequest{CallID: w.CallID, MerchantID: w.Merchant},
		Template: tmpl,
	}, nil
}

func (a *acme) Answer(_ context.Context, req *plugins.AnswerRequest) (*plugins.Response, error) {
	if req.Allocation != nil {
		return answer(*req.Allocation)
	}
	return plugins.JSONAnswer(req.Failure.Status, map[string]string{"error": req.Failure.Message})
}

func answer(al plugins.Allocation) (*plugins.Response, error) {
	return plugins.JSONAnswer(http.StatusOK, map[string]string{"stream_url": al.WSURL})
}
