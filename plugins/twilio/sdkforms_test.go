package twilio_test

import (
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
)

// The test's own builders of the forms Twilio's validators sign, written
// apart from the implementation (different code paths: net/url, utf16,
// regexp) so that a shared mistake is unlikely.

func less(a, b string) bool { return a < b }

func lessUTF16(a, b string) bool {
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b))) < 0
}

// paramsFirst is twilio-go's ValidateBody: names sorted by bytes, the first
// value of each.
func paramsFirst(form url.Values) string {
	names := make([]string, 0, len(form))
	for n := range form {
		names = append(names, n)
	}
	sort.Strings(names)
	s := ""
	for _, n := range names {
		s += n + form[n][0]
	}
	return s
}

// paramsAll is twilio-node's and twilio-python's: every distinct value.
func paramsAll(form url.Values, lt func(a, b string) bool) string {
	names := make([]string, 0, len(form))
	for n := range form {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return lt(names[i], names[j]) })
	s := ""
	for _, n := range names {
		vs := slices.Clone(form[n])
		sort.Slice(vs, func(i, j int) bool { return lt(vs[i], vs[j]) })
		for i, v := range vs {
			if i == 0 || v != vs[i-1] {
				s += n + v
			}
		}
	}
	return s
}

func testTogglePort(u string) (string, bool) {
	p, err := url.Parse(u)
	if err != nil {
		return "", false
	}
	switch {
	case p.Port() != "":
		p.Host = p.Hostname()
	case p.Scheme == "https":
		p.Host += ":443"
	default:
		p.Host += ":80"
	}
	return p.String(), true
}

func withPort(u, port string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	p.Host = p.Hostname() + ":" + port
	return p.String()
}

var escapeRE = regexp.MustCompile(`%[0-9a-fA-F]{2}`)

func caseEscapes(u string, f func(string) string) string {
	return escapeRE.ReplaceAllStringFunc(u, f)
}

// nodeLegacyQuery is Node's querystring.stringify(querystring.parse(q)).
func nodeLegacyQuery(u string) (string, bool) {
	base, q, ok := strings.Cut(u, "?")
	if !ok || q == "" {
		return "", false
	}
	decode := func(s string) string {
		s = strings.ReplaceAll(s, "+", " ")
		s = escapeRE.ReplaceAllStringFunc(s, func(m string) string {
			b, _ := strconv.ParseUint(m[1:], 16, 8)
			return string([]byte{byte(b)})
		})
		return string([]rune(s)) // invalid UTF-8: U+FFFD per byte, as Node's Buffer does
	}
	var keys []string
	vals := map[string][]string{}
	for _, pair := range strings.Split(q, "&") {
		k, v, _ := strings.Cut(pair, "=")
		if k == "" && v == "" {
			continue
		}
		k, v = decode(k), decode(v)
		if _, seen := vals[k]; !seen {
			keys = append(keys, k)
		}
		vals[k] = append(vals[k], v)
	}
	index := func(k string) (uint64, bool) {
		n, err := strconv.ParseUint(k, 10, 32)
		return n, err == nil && n < 1<<32-1 && strconv.FormatUint(n, 10) == k
	}
	sort.SliceStable(keys, func(i, j int) bool {
		a, aok := index(keys[i])
		b, bok := index(keys[j])
		return aok && (!bok || a < b)
	})
	escape := strings.NewReplacer("+", "%20", "%21", "!", "%27", "'", "%28", "(", "%29", ")", "%2A", "*")
	var parts []string
	for _, k := range keys {
		for _, v := range vals[k] {
			parts = append(parts, escape.Replace(url.QueryEscape(k))+"="+escape.Replace(url.QueryEscape(v)))
		}
	}
	return base + "?" + strings.Join(parts, "&"), true
}
