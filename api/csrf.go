package api

import (
	"mime"
	"net/http"
	"net/url"
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
			writeJSON(w, http.StatusForbidden, map[string]any{"success": false, "error": "cross-origin request refused", "code": "cross_origin"})
			return
		}
		if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
			mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || mt != "application/json" {
				writeJSON(w, http.StatusUnsupportedMediaType, map[string]any{"success": false, "error": "the body must be JSON (Content-Type: application/json)", "code": "unsupported_media_type"})
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
