package allocator

import "fmt"

// MaxIDLength bounds every id that becomes part of a Redis key name.
const MaxIDLength = 128

// ValidateID checks an id that becomes part of a Redis key (a call id, pod
// name, merchant id or tier name): 1 to MaxIDLength bytes of letters, digits,
// '-', '_' and '.'. A colon is refused because it is the key schema's
// separator: "acme:pods" as a merchant id would name another merchant's key.
// kind names the id in the error ("call_sid", "pod_name", ...).
func ValidateID(kind, s string) error {
	if s == "" {
		return fmt.Errorf("%w: %s is empty", ErrInvalidID, kind)
	}
	if s == "." || s == ".." {
		// Valid characters, but a path segment of its own meaning: ids
		// end up in media URLs.
		return fmt.Errorf("%w: %s %q is a relative path segment", ErrInvalidID, kind, s)
	}
	if len(s) > MaxIDLength {
		return fmt.Errorf("%w: %s is %d bytes long, the limit is %d", ErrInvalidID, kind, len(s), MaxIDLength)
	}
	for i := 0; i < len(s); i++ {
		if !idByte(s[i]) {
			return fmt.Errorf("%w: %s %q has a character outside [A-Za-z0-9_.-] at byte %d", ErrInvalidID, kind, s, i)
		}
	}
	return nil
}

func idByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}
