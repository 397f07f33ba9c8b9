package telnyx

import "strings"

// maxCallSidLen bounds a CallSid: edge's ids are at most 128 bytes.
const maxCallSidLen = 128

// CallID maps a TeXML CallSid (the call's call_control_id: "v3:" and
// base64url, e.g. "v3:9X2vxPDF…-aiQ") to edge's call id. edge's ids are
// [A-Za-z0-9_.-] (they name Redis keys and reach media URLs), so the colon
// after the version becomes a dot: "v3.9X2vxPDF…-aiQ". base64url has no
// dot, so the mapping is one to one. ok is false for anything that is not
// of that form.
func CallID(callSid string) (string, bool) {
	if len(callSid) > maxCallSidLen {
		return "", false
	}
	version, rest, found := strings.Cut(callSid, ":")
	if !found || len(version) < 2 || len(version) > 4 || version[0] != 'v' || rest == "" {
		return "", false
	}
	for i := 1; i < len(version); i++ {
		if version[i] < '0' || version[i] > '9' {
			return "", false
		}
	}
	for i := 0; i < len(rest); i++ {
		if !base64URLByte(rest[i]) {
			return "", false
		}
	}
	return version + "." + rest, true
}

func base64URLByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}
