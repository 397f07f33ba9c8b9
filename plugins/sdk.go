package plugins

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Helpers every provider needs. They are small on purpose: a provider's
// protocol details stay in its own package, next to its tests.

// ErrMalformed is returned by the parsers for a body that is not what the
// provider sends; the webhook is answered 400.
var ErrMalformed = errors.New("malformed request")

// ParseForm parses an application/x-www-form-urlencoded body strictly: a
// bad escape or a ';' separator is an error, not a silently dropped field.
func ParseForm(body []byte) (url.Values, error) {
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("%w: form body: %v", ErrMalformed, err)
	}
	return v, nil
}

// SplitList splits a comma-separated setting (auth_tokens, allow-lists)
// into its trimmed, non-empty items.
func SplitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// EqualMAC compares two MACs (or their encodings) in constant time.
func EqualMAC(a, b []byte) bool { return hmac.Equal(a, b) }

// EqualSecret compares two secrets in constant time, whatever their
// lengths: both are hashed first, so not even the length leaks.
func EqualSecret(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// URLPortVariants returns u as given and with its default port toggled
// (https:443, http:80): a provider may sign either form, depending on how
// the webhook URL was entered. Invalid URLs are returned alone.
func URLPortVariants(u string) []string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return []string{u}
	}
	def := map[string]string{"https": "443", "http": "80", "wss": "443", "ws": "80"}[p.Scheme]
	if def == "" {
		return []string{u}
	}
	other := *p
	if p.Port() == def {
		other.Host = p.Hostname()
		if strings.Contains(other.Host, ":") {
			other.Host = "[" + other.Host + "]"
		}
	} else if p.Port() == "" {
		other.Host = net.JoinHostPort(p.Hostname(), def)
	} else {
		return []string{u}
	}
	return []string{u, other.String()}
}

// CallQuery reads the predecessor's query parameters into an allocation
// request: merchant_id (or reseller_id, which its code read), flow and
// template.
func CallQuery(q url.Values, callID string) *AllocationRequest {
	merchant := q.Get("merchant_id")
	if merchant == "" {
		merchant = q.Get("reseller_id")
	}
	return &AllocationRequest{CallID: callID, MerchantID: merchant, Flow: q.Get("flow"), Template: q.Get("template")}
}

// XMLAnswer encodes v with encoding/xml behind an XML declaration.
func XMLAnswer(status int, v any) (*Response, error) {
	body, err := xml.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &Response{Status: status, ContentType: "application/xml", Body: append([]byte(xml.Header), body...)}, nil
}

// JSONAnswer encodes v with encoding/json.
func JSONAnswer(status int, v any) (*Response, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &Response{Status: status, ContentType: "application/json", Body: append(body, '\n')}, nil
}

// Reject is a JSON error answer in edge's own shape
// ({"success":false,"error":...,"code":...}) for requests a provider refuses.
func Reject(status int, code, message string) *WebhookResult {
	resp, _ := JSONAnswer(status, struct {
		Success bool   `json:"success"`
		Error   string `json:"error"`
		Code    string `json:"code"`
	}{false, message, code})
	return &WebhookResult{Answer: resp}
}

// Common rejections.
func RejectForbidden(why string) *WebhookResult {
	return Reject(http.StatusForbidden, "forbidden", why)
}

// RejectBadRequest answers 400 with why.
func RejectBadRequest(why string) *WebhookResult {
	return Reject(http.StatusBadRequest, "invalid_request", why)
}

// SpokenRefusal is what a markup provider's answer (TwiML, Plivo XML,
// TeXML) to a refused call says, and with which HTTP status, when the
// call is not for the number's fallback URL: the words for a replay of an
// ended call, else say; the failure's status where the plugin passes
// edge's statuses on (statuses: its own option), else 200 so that the
// provider plays the words.
func SpokenRefusal(f *Failure, statuses bool, say, ended string) (status int, words string) {
	status, words = http.StatusOK, say
	if statuses && f.Status != 0 {
		status = f.Status
	}
	if f.Reason == ReasonCallEnded {
		words = ended
	}
	return status, words
}

// FallbackAnswer is the answer to a Failure with Fallback set for a
// provider that calls the number's fallback URL on an HTTP error: the
// failure's status (503 unless it is 4xx or 5xx) with edge's JSON error as
// the body, which the provider ignores but shows in its request log.
func FallbackAnswer(f *Failure) *Response {
	status := f.Status
	if status < 400 || status > 599 {
		status = http.StatusServiceUnavailable
	}
	code := f.Reason
	if code == "" {
		code = f.Kind.String()
	}
	return Reject(status, code, f.Message).Answer
}
