package mediaurl

import (
	"errors"
	"net/url"
	"strings"
)

// The media URL is minted and parsed here, in one place:
//
//	{base}/ws/pod/{pod}/{token}{path}
//
// base is the public ws:// or wss:// URL of edge, token binds the socket to
// its call (see Signer), and path is what the pod is asked for (the
// predecessor's agent path); the proxy strips everything before it, as the
// nginx hop stripped /ws/pod/{pod}.

// PathPrefix starts every media socket path; the public listener routes it
// to the proxy.
const PathPrefix = "/ws/pod/"

// URL returns the media WebSocket URL of callID on pod with a fresh token
// that covers path. pod and path must be validated by the caller: path is
// "" or starts with "/" and has [A-Za-z0-9_.-] segments (see CleanPath).
func (s *Signer) URL(base, callID, pod, path string) string {
	return s.url(base, callID, pod, path, path)
}

// url builds the URL with a token minted over signed (the path, or the
// path and the query: signedPath).
func (s *Signer) url(base, callID, pod, path, signed string) string {
	var b strings.Builder
	b.WriteString(strings.TrimRight(base, "/"))
	b.WriteString(PathPrefix)
	b.WriteString(pod)
	b.WriteByte('/')
	b.WriteString(s.Mint(callID, pod, signed))
	b.WriteString(path)
	return b.String()
}

// Target is a parsed /ws/pod/<pod>[/<token>]/<rest> path.
type Target struct {
	Pod   string
	Token string // "" when the first segment is not a token
	// Path is what the pod is asked for, /<rest>, checked by CleanPath and
	// covered by the token's MAC.
	Path string
	// Query is the client's raw query, checked by cleanQuery.
	Query string
	// URI is Path plus Query: what the pod is asked for.
	URI string
	// Signed is set by VerifyTarget when the token covers Query.
	Signed bool
}

// Ways a media path is refused, before any Redis read or dial.
var (
	ErrUnknownPod = errors.New("unknown pod")
	ErrBadPath    = errors.New("media path or query not safe to forward")
)

// ParseTarget reads a media socket's escaped path and raw query. A
// malformed pod segment is ErrUnknownPod; a path or query that is not
// safe to hand a pod is ErrBadPath.
func ParseTarget(escapedPath, rawQuery string) (Target, error) {
	path, ok := strings.CutPrefix(escapedPath, PathPrefix)
	if !ok {
		return Target{}, ErrUnknownPod
	}
	pod, rest, _ := strings.Cut(path, "/")
	if !validID(pod) {
		return Target{}, ErrUnknownPod
	}
	t := Target{Pod: pod}
	if first, after, _ := strings.Cut(rest, "/"); strings.HasPrefix(first, tokenPrefix) {
		t.Token, rest = first, after
	}
	t.Path = "/" + rest
	if !CleanPath(t.Path) || !cleanQuery(rawQuery) {
		return Target{}, ErrBadPath
	}
	t.URI, t.Query = t.Path, rawQuery
	if rawQuery != "" {
		t.URI += "?" + rawQuery
	}
	return t, nil
}

// CleanPath accepts "/" and "/seg/seg..." where every segment is made of
// [A-Za-z0-9_.~-], is not "." or "..", and none is empty: no percent
// escapes at all, so no encoded traversal, CR, LF or NUL can reach a pod,
// and what the token signed is what the pod reads.
func CleanPath(p string) bool {
	if p == "/" {
		return true
	}
	if len(p) > 1024 || p[0] != '/' {
		return false
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
		for i := 0; i < len(seg); i++ {
			if !idByte(seg[i]) && seg[i] != '~' {
				return false
			}
		}
	}
	return true
}

// cleanQuery refuses control characters in the query, raw or
// percent-encoded (%00-%1F, %7F), and malformed escapes: the pod's HTTP
// parser or logs must never see a CR, LF or NUL from a client.
func cleanQuery(q string) bool {
	if len(q) > 4096 {
		return false
	}
	// The decoded query holds the raw bytes too; a malformed escape fails.
	d, err := url.PathUnescape(q)
	return err == nil && !strings.ContainsFunc(d, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// validID mirrors the allocator's id rule ([A-Za-z0-9_.-]{1,128}), so a pod
// name is never looked up or logged unless it could be real.
// "." and ".." are refused: as path segments they mean something else.
func validID(s string) bool {
	if s == "" || len(s) > 128 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !idByte(s[i]) {
			return false
		}
	}
	return true
}

func idByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}
