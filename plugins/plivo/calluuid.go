package plivo

// ValidCallUUID reports whether s is a UUID in its text form
// (8-4-4-4-12 hex digits, RFC 9562 section 4), as Plivo documents
// CallUUID. Hex digits are case-insensitive on input (RFC 9562); Plivo
// sends lower case.
//
// Plivo's V3 signature concatenates body params as name+value with no
// separator, so a captured webhook rewritten as CallUUID=<uuid>Directioninbound
// (Direction dropped) keeps its signature: only a value of the documented
// form can be a call id, and such a body is refused.
func ValidCallUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
