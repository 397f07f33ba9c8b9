package proxy

import "strings"

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
// "" or starts with "/" and has [A-Za-z0-9_.-] segments (see cleanPath).
func (s *Signer) URL(base, callID, pod, path string) string {
	var b strings.Builder
	b.WriteString(strings.TrimRight(base, "/"))
	b.WriteString(PathPrefix)
	b.WriteString(pod)
	b.WriteByte('/')
	b.WriteString(s.Mint(callID, pod, path))
	b.WriteString(path)
	return b.String()
}
