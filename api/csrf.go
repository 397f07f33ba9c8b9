package api

import (
	"mime"
	"net/http"
	"net/url"

	"github.com/edge-voice/edge/calls"
)

// sameOriginJSON refuses state-changing requests (anything but GET, HEAD
// and OPTIONS) that a browser could send on a stranger's behalf: a
// cross-origin one (Origin or Sec-Fetch-Site say so) and one whose body is
// not JSON (text/plain and form bodies need no CORS preflight, so a page
// anywhere could POST them to an admin port it can reach). Clients that
// are not browsers send neither header and send JSON already.
func sameOriginJSON(next http.Handler) http.Handler {
	return sameOrigin(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stateChanging(r) && (r.ContentLength != 0 || len(r.TransferEncoding) > 0) {
			mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || mt != "application/json" {
				writeError(w, r, nil, calls.ErrNotJSON)
				return
			}
		}
		next.ServeHTTP(w, r)
	}))
}

// sameOrigin refuses state-changing requests that a browser says come from
// another origin, and takes any body. It guards the internal listener,
// whose callers (the predecessor's voice agents) post release and drain
// with no Content-Type or text/plain, as the predecessor accepted: a
// browser there sends Origin (or Sec-Fetch-Site) with every cross-origin
// POST, so refusing those keeps a page from driving it.
func sameOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stateChanging(r) && crossOrigin(r) {
			writeError(w, r, nil, calls.ErrCrossOrigin)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func stateChanging(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

func crossOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return true
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	return err != nil || u.Host != r.Host
}
