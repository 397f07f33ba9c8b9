package mediaurl

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// EncodeQuery gives one canonical form (sorted, no escapes) and refuses
// what could not be read back exactly or could smuggle anything.
func TestEncodeQuery(t *testing.T) {
	got, err := EncodeQuery(map[string]string{"sample-rate": "16000", "a_b": "x.y~z"})
	if err != nil || got != "a_b=x.y~z&sample-rate=16000" {
		t.Fatalf("EncodeQuery = %q, %v", got, err)
	}
	if got, err := EncodeQuery(nil); got != "" || err != nil {
		t.Errorf("no params: %q, %v", got, err)
	}
	many := map[string]string{}
	for i := range MaxParams + 1 {
		many[string(rune('a'+i))] = "1"
	}
	long := map[string]string{}
	for i := range MaxParams {
		long[strings.Repeat(string(rune('a'+i)), maxNameLen)] = strings.Repeat("v", maxValueLen)
	}
	for name, params := range map[string]map[string]string{
		"empty name":         {"": "1"},
		"empty value":        {"a": ""},
		"slash":              {"a": "x/y"},
		"encoded slash":      {"a": "x%2Fy"},
		"NUL":                {"a": "x\x00"},
		"encoded NUL":        {"a": "%00"},
		"dot-dot":            {"a": ".."},
		"dot":                {"a": "."},
		"second question":    {"a": "1?b=2"},
		"fragment":           {"a": "1#x"},
		"ampersand":          {"a": "1&b=2"},
		"equals in name":     {"a=b": "1"},
		"space":              {"a": "1 2"},
		"non-ASCII":          {"a": "é"},
		"name too long":      {strings.Repeat("n", maxNameLen+1): "1"},
		"value too long":     {"a": strings.Repeat("v", maxValueLen+1)},
		"too many":           many,
		"query too long":     long,
		"tilde in name only": {"a~": "1"},
	} {
		if got, err := EncodeQuery(params); !errors.Is(err, ErrBadParam) {
			t.Errorf("%s: EncodeQuery = %q, %v; want ErrBadParam", name, got, err)
		}
	}
}

// A token minted with a query covers it: the URL verifies only with
// exactly that query, and Signed says the query is edge's. A token minted
// without one keeps today's rule: the client's query rides along unsigned.
func TestVerifyTargetQuery(t *testing.T) {
	s := NewSigner([]byte("secret-secret-secret-secret-0001"), time.Minute)
	const base = "wss://edge.example.com"
	q, err := EncodeQuery(map[string]string{"sample-rate": "16000"})
	if err != nil {
		t.Fatal(err)
	}
	u := s.URLWithQuery(base+"/", "CA1", "pod-a", "/agent/v1", q)
	if want := "/agent/v1?sample-rate=16000"; !strings.HasSuffix(u, want) {
		t.Fatalf("URL %q does not end in %q", u, want)
	}
	pathOf := func(u string) string { p, _, _ := strings.Cut(u[len(base):], "?"); return p }
	signedPath := pathOf(u)
	plainPath := pathOf(s.URL(base, "CA1", "pod-a", "/agent/v1"))

	cases := map[string]struct {
		path, query string
		signed      bool
		err         error
	}{
		"exactly as minted":        {signedPath, "sample-rate=16000", true, nil},
		"no query":                 {signedPath, "", false, ErrBadToken},
		"other value":              {signedPath, "sample-rate=24000", false, ErrBadToken},
		"a parameter added":        {signedPath, "sample-rate=16000&x=1", false, ErrBadToken},
		"a parameter before":       {signedPath, "a=1&sample-rate=16000", false, ErrBadToken},
		"repeated":                 {signedPath, "sample-rate=16000&sample-rate=16000", false, ErrBadToken},
		"percent-encoded":          {signedPath, "sample%2Drate=16000", false, ErrBadToken},
		"encoded slash":            {signedPath, "sample-rate=16000%2F..", false, ErrBadToken},
		"second question mark":     {signedPath, "sample-rate=16000?x=1", false, ErrBadToken},
		"fragment":                 {signedPath, "sample-rate=16000#x", false, ErrBadToken},
		"query moved to path":      {signedPath + "/sample-rate=16000", "", false, ErrBadPath},
		"plain token, no query":    {plainPath, "", false, nil},
		"plain token, a query":     {plainPath, "x=1", false, nil},
		"plain token, look-alike":  {plainPath, "sample-rate=24000", false, nil},
		"signed query, plain path": {plainPath + "?sample-rate=16000", "", false, ErrBadPath},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tg, err := ParseTarget(tc.path, tc.query)
			if err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("ParseTarget: %v, want %v", err, tc.err)
				}
				return
			}
			id, err := s.VerifyTarget(&tg)
			if !errors.Is(err, tc.err) || tg.Signed != tc.signed {
				t.Fatalf("VerifyTarget = %q, %v, signed %v; want %v, signed %v", id, err, tg.Signed, tc.err, tc.signed)
			}
			if err == nil && (id != "CA1" || tg.Query != tc.query) {
				t.Errorf("VerifyTarget = %q, query %q", id, tg.Query)
			}
		})
	}

	// An expired token says so even when its query is what it signed.
	old := NewSigner([]byte("secret-secret-secret-secret-0001"), -time.Minute)
	tg, err := ParseTarget(pathOf(old.URLWithQuery(base, "CA1", "pod-a", "/agent/v1", q)), q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.VerifyTarget(&tg); !errors.Is(err, ErrExpiredToken) {
		t.Errorf("expired signed URL: %v, want ErrExpiredToken", err)
	}
}
