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
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			next.ServeHTTP(w, r)
			return
		}
		if crossOrigin(r) {
			writeError(w, r, nil, calls.ErrCrossOrigin)
			return
		}
		if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
			mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || mt != "application/json" {
				writeError(w, r, nil, calls.ErrNotJSON)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
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
