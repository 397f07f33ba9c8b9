package plugins

import (
	"cmp"
	"unicode/utf8"
)

// CompareUTF16 orders strings by their UTF-16 code units, as JavaScript's
// sort(), Java's compareTo and .NET's ordinal comparison do; the Go and
// Python SDKs of providers order by bytes (code points). The two differ
// only where a character above U+FFFF meets one in U+E000..U+FFFF: a
// signature check that sorts parameters must try both to accept every SDK.
// Invalid UTF-8 reads as U+FFFD.
func CompareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		a, b = a[na:], b[nb:]
		if ra == rb {
			continue
		}
		if c := cmp.Compare(utf16Key(ra), utf16Key(rb)); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

// utf16Key maps a rune to a key that orders like its UTF-16 code units:
// the first unit in the high half, the second (a low surrogate, for a rune
// above U+FFFF) in the low half.
func utf16Key(r rune) int64 {
	if r < 0x10000 {
		return int64(r) << 16
	}
	r -= 0x10000
	return int64(0xD800+r>>10)<<16 | int64(0xDC00+r&0x3FF)
}
