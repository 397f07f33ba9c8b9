package plugins

import "strings"

// LenientUnescape decodes a form or query value the way providers' SDKs
// do when they sign it: '+' is a space, a valid %XX escape is its byte, and
// anything else (a stray '%', a malformed escape) stays as it is, where
// url.QueryUnescape would give up on the whole value.
func LenientUnescape(s string) string {
	s = strings.ReplaceAll(s, "+", " ")
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && IsHexDigit(s[i+1]) && IsHexDigit(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// IsHexDigit reports whether c is 0-9, a-f or A-F.
func IsHexDigit(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
