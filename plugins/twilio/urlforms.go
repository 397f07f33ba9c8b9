package twilio

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/edge-voice/edge/plugins"
)

// urlForms returns the forms of fullURL that Twilio's own validators
// accept a signature for, fullURL first and without duplicates. Twilio's
// back end is inconsistent about the URL it signs, and its SDKs try:
//
//   - the port removed when the URL has one (any port), or the scheme's
//     default port added when it has none (twilio-go, twilio-node,
//     twilio-csharp, twilio-java: "sig generation on back-end is
//     inconsistent");
//   - each of those with the query re-encoded as Node's legacy querystring
//     module does (twilio-node's withLegacyQuerystring);
//   - percent-escapes with upper- or lower-case hex digits: they are the
//     same octet (RFC 3986 section 2.1), and a normalising hop or SDK
//     (.NET's Uri, Java's URI) may rewrite their case.
//
// Every form decodes to the same scheme, host, path and query values, so
// accepting any of them lets no one change what edge reads from the URL.
func urlForms(fullURL string) []string {
	forms := []string{fullURL}
	add := func(s string) {
		for _, f := range forms {
			if f == s {
				return
			}
		}
		forms = append(forms, s)
	}
	if p, ok := togglePort(fullURL); ok {
		add(p)
	}
	for _, f := range forms[:len(forms):len(forms)] {
		if l, ok := legacyQuery(f); ok {
			add(l)
		}
	}
	for _, f := range forms[:len(forms):len(forms)] {
		add(escapeCase(f, true))
		add(escapeCase(f, false))
	}
	return forms
}

// splitAuthority cuts u into "scheme://", the authority and the rest
// (path, query), by hand: re-serialising through net/url could change
// bytes the provider signed.
func splitAuthority(u string) (prefix, authority, rest string, ok bool) {
	i := strings.Index(u, "://")
	if i <= 0 {
		return "", "", "", false
	}
	prefix, after := u[:i+3], u[i+3:]
	end := strings.IndexAny(after, "/?#")
	if end < 0 {
		end = len(after)
	}
	return prefix, after[:end], after[end:], true
}

// togglePort removes the port of an http(s) URL that has one, whatever
// its number, or adds the scheme's default port to one that has none.
func togglePort(u string) (string, bool) {
	prefix, auth, rest, ok := splitAuthority(u)
	if !ok {
		return "", false
	}
	host := auth[strings.LastIndexByte(auth, '@')+1:]
	userinfo := auth[:len(auth)-len(host)]
	colon := strings.LastIndexByte(host, ':')
	if colon >= 0 && !strings.Contains(host[colon:], "]") {
		if _, err := strconv.ParseUint(host[colon+1:], 10, 16); err != nil {
			return "", false
		}
		return prefix + userinfo + host[:colon] + rest, true
	}
	def := "80"
	if strings.EqualFold(prefix, "https://") {
		def = "443"
	} else if !strings.EqualFold(prefix, "http://") {
		return "", false
	}
	return prefix + userinfo + host + ":" + def + rest, true
}

// escapeCase rewrites the hex digits of every valid percent-escape in u in
// upper (RFC 3986's recommended form) or lower case.
func escapeCase(u string, upper bool) string {
	b := []byte(u)
	for i := 0; i+2 < len(b); i++ {
		if b[i] != '%' || !plugins.IsHexDigit(b[i+1]) || !plugins.IsHexDigit(b[i+2]) {
			continue
		}
		for j := i + 1; j <= i+2; j++ {
			switch c := b[j]; {
			case upper && 'a' <= c && c <= 'f':
				b[j] = c - 'a' + 'A'
			case !upper && 'A' <= c && c <= 'F':
				b[j] = c - 'A' + 'a'
			}
		}
		i += 2
	}
	return string(b)
}

// legacyQuery re-encodes the query of u as Node's querystring module
// round-trips it (parse, then stringify): '+' and valid escapes decoded,
// invalid UTF-8 read as U+FFFD, repeated names grouped at their first
// place, integer-like names first in numeric order (JavaScript's property
// order), and everything but A-Z a-z 0-9 - _ . ! ~ * ' ( ) escaped in upper
// case. It reports false for a URL without a query.
func legacyQuery(u string) (string, bool) {
	base, query, ok := strings.Cut(u, "?")
	if !ok || query == "" {
		return "", false
	}
	query, _, _ = strings.Cut(query, "#")
	var entries []*legacyEntry
	byKey := map[string]*legacyEntry{}
	for pair := range strings.SplitSeq(query, "&") {
		k, v, _ := strings.Cut(pair, "=")
		if k == "" && v == "" {
			continue
		}
		k, v = legacyUnescape(k), legacyUnescape(v)
		if e := byKey[k]; e != nil {
			e.values = append(e.values, v)
			continue
		}
		e := &legacyEntry{key: k, values: []string{v}}
		byKey[k] = e
		entries = append(entries, e)
	}
	// JavaScript objects list array-index keys first, ascending.
	var index, named []*legacyEntry
	for _, e := range entries {
		if isArrayIndex(e.key) {
			index = append(index, e)
		} else {
			named = append(named, e)
		}
	}
	slices.SortFunc(index, func(a, b *legacyEntry) int {
		x, _ := strconv.ParseUint(a.key, 10, 64)
		y, _ := strconv.ParseUint(b.key, 10, 64)
		return cmp.Compare(x, y)
	})
	var b strings.Builder
	b.WriteString(base + "?")
	first := true
	for _, e := range append(index, named...) {
		for _, v := range e.values {
			if !first {
				b.WriteByte('&')
			}
			first = false
			b.WriteString(legacyEscape(e.key) + "=" + legacyEscape(v))
		}
	}
	return b.String(), true
}

type legacyEntry struct {
	key    string
	values []string
}

func legacyUnescape(s string) string {
	b := []byte(plugins.LenientUnescape(s))
	// Node decodes the bytes as UTF-8, each invalid byte as U+FFFD.
	var out strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		out.WriteRune(r)
		b = b[n:]
	}
	return out.String()
}

func legacyEscape(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.!~*'()", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// isArrayIndex: a canonical decimal below 2^32-1, as ECMAScript defines an
// array index.
func isArrayIndex(s string) bool {
	if s == "" || len(s) > 10 || (len(s) > 1 && s[0] == '0') {
		return false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return err == nil && n < 1<<32-1
}
