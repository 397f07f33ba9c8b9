package twilio_test

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"

	twiliosdk "github.com/twilio/twilio-go/client"

	"github.com/edge-voice/edge/plugins/twilio"
)

// Differential tests: twilio-go's RequestValidator (test-only dependency)
// is the oracle. For a generated URL and body, the test signs many forms
// of them; edge must accept every signature the SDK accepts (no false
// refusal), and may accept beyond it only the forms that other Twilio
// validators accept (urlForms and paramForms document them), never a
// mutated or truncated one.

// signedForm is one string the test signs, and whether edge may accept it
// when twilio-go does not.
type signedForm struct {
	kind  string
	s     string
	extra bool // accepted by another Twilio validator (node, .NET, Java)
}

func forms(u string, form url.Values) []signedForm {
	first, all, utf16 := paramsFirst(form), paramsAll(form, less), paramsAll(form, lessUTF16)
	var out []signedForm
	urls := []signedForm{{"url", u, false}}
	if p, ok := testTogglePort(u); ok {
		urls = append(urls, signedForm{"port", p, false})
	}
	if l, ok := nodeLegacyQuery(u); ok {
		urls = append(urls, signedForm{"legacy", l, true})
	}
	urls = append(urls,
		signedForm{"upper", caseEscapes(u, strings.ToUpper), true},
		signedForm{"lower", caseEscapes(u, strings.ToLower), true},
		signedForm{"other port", withPort(u, "8444"), false},
		signedForm{"mutated", u + "x", false},
	)
	for _, su := range urls {
		out = append(out,
			signedForm{su.kind + "+first", su.s + first, su.extra},
			signedForm{su.kind + "+all", su.s + all, true},
			signedForm{su.kind + "+utf16", su.s + utf16, true},
		)
		if first != "" {
			out = append(out, signedForm{su.kind + "+truncated", su.s + first[:len(first)-1], false})
		}
	}
	for i := range out {
		if strings.HasPrefix(out[i].kind, "other port") || strings.HasPrefix(out[i].kind, "mutated") || strings.HasSuffix(out[i].kind, "truncated") {
			out[i].extra = false
		}
	}
	return out
}

// checkAgainstSDK is the differential property for one URL and body.
func checkAgainstSDK(t *testing.T, u string, body []byte) {
	t.Helper()
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return // edge answers 400 before verifying; the SDK refuses too
	}
	if p, err := url.Parse(u); err != nil || p.Query().Has("bodySHA256") {
		return // not a form webhook's URL
	}
	v := twiliosdk.NewRequestValidator(tokNew)
	for _, f := range forms(u, form) {
		sig := rawSign(tokNew, f.s)
		sdk := v.ValidateBody(u, body, sig)
		edge := twilio.Verify([]string{tokNew}, u, form, sig)
		if f.kind == "url+first" && !sdk {
			t.Fatalf("the oracle refuses the plain form: the test is wrong (%q)", f.s)
		}
		if sdk && !edge {
			t.Errorf("false refusal: twilio-go accepts %s form %q of URL %q body %q", f.kind, f.s, u, body)
		}
		if edge && !sdk && !f.extra {
			t.Errorf("edge accepts %s form %q of URL %q body %q; twilio-go and the other validators do not", f.kind, f.s, u, body)
		}
	}
}

func TestVerifyAgainstTwilioGo(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 400 {
		checkAgainstSDK(t, genURL(r), genBody(r))
	}
}

// FuzzVerifyAgainstSDK lets the fuzzer pick the URL's parts and the body.
func FuzzVerifyAgainstSDK(f *testing.F) {
	f.Add(true, "edge.example.com", uint16(0), "/api/v1/twilio/allocate", "merchant_id=acme&flow=v2", []byte("CallSid="+sid+"&From=%2B1"))
	f.Add(false, "h", uint16(8443), "/a b/%c3%a9", "x=%27&x=1&10=a&2=b&y=a+b&z=%zz", []byte("A=2&A=1&%EF%BC%A1=1&%F0%9F%98%80=2"))
	f.Add(true, "h", uint16(443), "/", "", []byte(""))
	f.Fuzz(func(t *testing.T, https bool, host string, port uint16, path, query string, body []byte) {
		checkAgainstSDK(t, buildURL(https, host, port, path, query), body)
	})
}

// buildURL makes the kind of URL edge rebuilds: a DNS host, a path escaped
// as net/url escapes it, the raw query (no '#', no spaces or controls).
func buildURL(https bool, host string, port uint16, path, query string) string {
	scheme := "http"
	if https {
		scheme = "https"
	}
	h := strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return -1
	}, strings.ToLower(host))
	if h == "" {
		h = "h"
	}
	if port != 0 {
		h += fmt.Sprintf(":%d", port)
	}
	p := (&url.URL{Path: "/" + strings.TrimPrefix(path, "/")}).EscapedPath()
	q := strings.Map(func(r rune) rune {
		if r <= ' ' || r >= 0x7f || r == '#' {
			return -1
		}
		return r
	}, query)
	u := scheme + "://" + h + p
	if q != "" {
		u += "?" + q
	}
	return u
}

func genURL(r *rand.Rand) string {
	paths := []string{"/api/v1/twilio/allocate", "/a%2fb", "/%c3%a9t%C3%A9", "/x/"}
	queries := []string{"", "merchant_id=acme&flow=v2", "x=%27q%27&y=a+b", "b=1&a=2&b=3&10=x&2=y", "a=%2f&b=%2F", "x=%zz&y=%", "x='&z=~*"}
	ports := []uint16{0, 0, 80, 443, 8443}
	return buildURL(r.IntN(2) == 0, []string{"edge.example.com", "h"}[r.IntN(2)], ports[r.IntN(len(ports))], paths[r.IntN(len(paths))], queries[r.IntN(len(queries))])
}

func genBody(r *rand.Rand) []byte {
	names := []string{"CallSid", "From", "To", "A", "\uFF21", "\U0001F600", "a b", "Direction"}
	values := []string{sid, "+15550100", "1", "2", "é", "", "a&b"}
	v := url.Values{}
	for range r.IntN(5) {
		v.Add(names[r.IntN(len(names))], values[r.IntN(len(values))])
	}
	return []byte(v.Encode())
}
