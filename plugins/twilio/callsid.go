package twilio

import "strings"

// ValidCallSid reports whether s has the form of a Twilio Call SID: "CA"
// followed by 32 lower-case hex digits (Twilio's API reference: the sid of
// a Call resource, pattern ^CA[0-9a-fA-F]{32}$, which Twilio emits in lower
// case).
//
// The check is what keeps a field boundary where it was signed: Twilio's
// signature concatenates name+value with no separator, so a captured
// webhook rewritten as CallSid=CA…Directioninbound (Direction dropped)
// keeps its signature. Only a value of the documented length and alphabet
// can be a call id, so such a body is refused instead of allocating under
// a new id.
func ValidCallSid(s string) bool {
	if len(s) != 34 || s[:2] != "CA" {
		return false
	}
	for i := 2; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ValidAccountSid reports whether s has the form of a Twilio Account SID,
// "AC" followed by 32 hex digits, in either case: an account's label in
// edge's config, where the environment's form lower-cases it.
func ValidAccountSid(s string) bool {
	if len(s) != 34 || !strings.EqualFold(s[:2], "AC") {
		return false
	}
	for i := 2; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
