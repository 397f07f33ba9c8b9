package main

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/plugins/plivo"
)

// resumeProvider is one provider as the resumption tests play it: its
// plugin's settings, a signed webhook for the test's call, and the
// messages of its media stream as the provider's docs give them (the
// opening as plugins/<name>/testdata/stream_opening.jsonl has it).
type resumeProvider struct {
	name string
	// callID is edge's id of the call (a Telnyx call control id with its
	// ':' made '.').
	callID string
	// plugin is the provider's section of providers.plugins, indented.
	plugin string
	// webhook posts the signed webhook and returns the media URL its
	// answer names.
	webhook func(t *testing.T, e *mediaReplica) string
	opening []string
	// notice is what the provider's plugin has edge tell it after a move,
	// filled from the opening.
	notice string
	// media is the media message of sequence number seq (the start
	// message is 1); stop the provider's last message ("": none, the
	// socket just closes).
	media, stop func(seq int) string
}

// resumePayload is 20 ms of silent 8 kHz audio, as every provider sends it.
var resumePayload = base64.StdEncoding.EncodeToString(make([]byte, 160))

const resumeBase = "https://edge.example.com"

func twilioResume() resumeProvider {
	const (
		sid, stream, acct = "CA00000000000000000000000000005e51", "MZ00000000000000000000000000005e51", "AC00000000000000000000000000005e51"
		token             = "e2e-resume-twilio-token"
	)
	return resumeProvider{
		name: "twilio", callID: sid,
		plugin: "    twilio: {auth_tokens: [" + token + "]}\n",
		webhook: func(t *testing.T, e *mediaReplica) string {
			const path = "/api/v1/twilio/allocate?merchant_id=m"
			form := url.Values{"AccountSid": {acct}, "CallSid": {sid}, "From": {"+15550100"}, "To": {"+15550199"}}
			status, body := resumePost(t, e.public+path, form.Encode(), http.Header{
				"Content-Type":       {"application/x-www-form-urlencoded"},
				"X-Twilio-Signature": {edgetest.TwilioSign(token, resumeBase+path, form)}})
			return resumeMatch(t, "twilio", status, body, statusStreamURL)
		},
		opening: []string{
			`{"event":"connected","protocol":"Call","version":"1.0.0"}`,
			`{"event":"start","sequenceNumber":"1","start":{"accountSid":"` + acct + `","streamSid":"` + stream + `","callSid":"` + sid +
				`","tracks":["inbound"],"customParameters":{"merchant_id":"m"},"mediaFormat":{"encoding":"audio/x-mulaw","sampleRate":8000,"channels":1}},"streamSid":"` + stream + `"}`,
		},
		notice: `{"event":"clear","streamSid":"` + stream + `"}`,
		media: func(seq int) string {
			return fmt.Sprintf(`{"event":"media","sequenceNumber":"%d","media":{"track":"inbound","chunk":"%d","timestamp":"%d","payload":%q},"streamSid":%q}`,
				seq, seq-1, (seq-2)*20, resumePayload, stream)
		},
		stop: func(seq int) string {
			return fmt.Sprintf(`{"event":"stop","sequenceNumber":"%d","stop":{"accountSid":%q,"callSid":%q},"streamSid":%q}`, seq, acct, sid, stream)
		},
	}
}

var plivoStreamURL = regexp.MustCompile(`<Stream[^>]*>([^<]+)</Stream>`)

func plivoResume() resumeProvider {
	const (
		callUUID, stream, acct = "00000000-0000-4000-8000-000000005e51", "00000000-0000-4000-8000-0000000005e5", "MA00000000000000005E51"
		token                  = "e2e-resume-plivo-token"
	)
	return resumeProvider{
		name: "plivo", callID: callUUID,
		plugin: "    plivo: {auth_tokens: [" + token + "]}\n",
		webhook: func(t *testing.T, e *mediaReplica) string {
			const path, nonce = "/api/v1/plivo/allocate?merchant_id=m", "83401725239181705631"
			form := url.Values{"CallUUID": {callUUID}, "From": {"+15550100"}, "To": {"+15550199"}, "Direction": {"inbound"}}
			sig, err := plivo.Signature(token, http.MethodPost, resumeBase+path, form, nonce)
			if err != nil {
				t.Fatal(err)
			}
			status, body := resumePost(t, e.public+path, form.Encode(), http.Header{
				"Content-Type":        {"application/x-www-form-urlencoded"},
				plivo.NonceHeader:     {nonce},
				plivo.SignatureHeader: {sig}})
			return resumeMatch(t, "plivo", status, body, plivoStreamURL)
		},
		// Plivo opens with start alone.
		opening: []string{
			`{"event":"start","sequenceNumber":1,"start":{"callId":"` + callUUID + `","streamId":"` + stream + `","accountId":"` + acct +
				`","tracks":["inbound"],"mediaFormat":{"encoding":"audio/x-mulaw","sampleRate":8000}},"extra_headers":"merchantId=m"}`,
		},
		notice: `{"event":"clearAudio","streamId":"` + stream + `"}`,
		media: func(seq int) string {
			return fmt.Sprintf(`{"event":"media","sequenceNumber":%d,"streamId":%q,"media":{"track":"inbound","timestamp":"%d","chunk":%d,"payload":%q},"extra_headers":"merchantId=m"}`,
				seq, stream, (seq-2)*20, seq-1, resumePayload)
		},
		stop: func(int) string { return "" },
	}
}

func exotelResume() resumeProvider {
	const (
		sid, stream, acct = "b0f7c0a2d4e6f8a0b2c4d6e8f0a25e51", "c1e8d1b3e5f7a9b1c3d5e7f9a1b35e51", "edgee2e1"
		creds             = "edge:e2e-resume-exotel-secret"
	)
	return resumeProvider{
		name: "exotel", callID: sid,
		plugin: "    exotel: {auth_tokens: [\"" + creds + "\"]}\n",
		webhook: func(t *testing.T, e *mediaReplica) string {
			status, body := resumePost(t, e.public+"/api/v1/exotel/allocate?merchant_id=m",
				`{"CallSid":"`+sid+`","CallFrom":"09999999999","CallTo":"08047491899"}`, http.Header{
					"Content-Type":  {"application/json"},
					"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(creds))}})
			var ans struct{ URL string }
			if status != http.StatusOK || json.Unmarshal([]byte(body), &ans) != nil || ans.URL == "" {
				t.Fatalf("exotel webhook: %d %s", status, body)
			}
			return ans.URL
		},
		opening: []string{
			`{"event":"connected"}`,
			`{"event":"start","sequence_number":"1","stream_sid":"` + stream + `","start":{"stream_sid":"` + stream + `","call_sid":"` + sid + `","account_sid":"` + acct +
				`","from":"09999999999","to":"08047491899","custom_parameters":{"merchant_id":"m"},"media_format":{"encoding":"audio/x-raw","sample_rate":"8000","bit_rate":"16"}}}`,
		},
		notice: `{"event":"clear","stream_sid":"` + stream + `"}`,
		media: func(seq int) string {
			return fmt.Sprintf(`{"event":"media","sequence_number":"%d","stream_sid":%q,"media":{"chunk":"%d","timestamp":"%d","payload":%q}}`,
				seq, stream, seq-1, (seq-2)*20, resumePayload)
		},
		stop: func(seq int) string {
			return fmt.Sprintf(`{"event":"stop","sequence_number":"%d","stream_sid":%q,"stop":{"call_sid":%q,"account_sid":%q,"reason":"callended"}}`, seq, stream, sid, acct)
		},
	}
}

func telnyxResume() resumeProvider {
	const (
		ccid   = "v3:e2eTelnyxResumeCallControlId_0123456789-abcdefghijk"
		stream = "32de0dea-53cb-4b21-89a4-9e1819c05e51"
	)
	key := ed25519.NewKeyFromSeed([]byte("telnyx-e2e-resume-key-seed-32by!"))
	return resumeProvider{
		name: "telnyx", callID: strings.ReplaceAll(ccid, ":", "."),
		plugin: "    telnyx: {auth_tokens: [" + base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey)) + "]}\n",
		webhook: func(t *testing.T, e *mediaReplica) string {
			status, body := telnyxWebhook(t, e, key, time.Now(), "AccountSid=acct&CallSid="+ccid+"&From=%2B15550100&To=%2B15550199")
			return resumeMatch(t, "telnyx", status, body, telnyxStreamURL)
		},
		opening: []string{
			`{"event":"connected","version":"1.0.0"}`,
			`{"event":"start","sequence_number":"1","start":{"user_id":"u","call_control_id":"` + ccid +
				`","client_state":null,"media_format":{"encoding":"PCMU","sample_rate":8000,"channels":1}},"stream_id":"` + stream + `"}`,
		},
		notice: `{"event":"clear"}`,
		media: func(seq int) string {
			return fmt.Sprintf(`{"event":"media","sequence_number":"%d","media":{"track":"inbound","chunk":"%d","timestamp":"%d","payload":%q},"stream_id":%q}`,
				seq, seq-1, (seq-2)*20, resumePayload, stream)
		},
		stop: func(seq int) string {
			return fmt.Sprintf(`{"event":"stop","sequence_number":"%d","stop":{"user_id":"u","call_control_id":%q},"stream_id":%q}`, seq, ccid, stream)
		},
	}
}

// resumePost posts body with header and returns the answer.
func resumePost(t *testing.T, u, body string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// resumeMatch is the media URL of a markup answer.
func resumeMatch(t *testing.T, provider string, status int, body string, re *regexp.Regexp) string {
	t.Helper()
	m := re.FindStringSubmatch(body)
	if status != http.StatusOK || m == nil {
		t.Fatalf("%s webhook: %d %s", provider, status, body)
	}
	return html.UnescapeString(strings.TrimSpace(m[1]))
}

// mediaSeq is the sequence number of a provider's media message (Plivo's
// is a number, the others' a string), ok false for any other message.
func mediaSeq(msg []byte) (int, bool) {
	var m struct {
		Event string          `json:"event"`
		Camel json.RawMessage `json:"sequenceNumber"`
		Snake json.RawMessage `json:"sequence_number"`
	}
	if json.Unmarshal(msg, &m) != nil || m.Event != "media" {
		return 0, false
	}
	raw := m.Camel
	if raw == nil {
		raw = m.Snake
	}
	n, err := strconv.Atoi(strings.Trim(string(raw), `"`))
	return n, err == nil
}
