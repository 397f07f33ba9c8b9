// Package mediaurl is the media URL contract between the answer edge gives
// a provider and the socket the provider opens with it:
//
//	{base}/ws/pod/{pod}/{token}{path}[?{provider parameters}]
//
// It owns the path prefix, the per-call token (Signer: minted when a call
// is allocated, verified when its socket arrives, on any replica), the
// signed query of a provider's parameters (query.go) and the rules a
// media path and query must meet before anything of them reaches a pod. It knows nothing of sockets: the proxy parses with it, the call
// service and the API mint and route with it.
package mediaurl
