package exotel

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/edge-voice/edge/plugins"
)

// allowList is a set of prefixes; empty allows everyone.
type allowList struct{ prefixes []netip.Prefix }

func parseAllowList(s string) (*allowList, error) {
	a := &allowList{}
	for _, item := range plugins.SplitList(s) {
		if !strings.Contains(item, "/") {
			ip, err := netip.ParseAddr(item)
			if err != nil {
				return nil, notIP(item)
			}
			a.prefixes = append(a.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(item)
		if err != nil {
			return nil, notIP(item)
		}
		a.prefixes = append(a.prefixes, p.Masked())
	}
	return a, nil
}

func notIP(item string) error {
	return &plugins.InvalidSetting{Key: SettingAllowIPs, Reason: fmt.Sprintf("%q is not an IP or CIDR", item)}
}

func (a *allowList) empty() bool { return len(a.prefixes) == 0 }

// Allows reports whether ip is in the list (an empty list allows all).
func (a *allowList) allows(ip string) bool {
	if a.empty() {
		return true
	}
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	addr = addr.Unmap() // an IPv4 client seen on a dual-stack socket
	for _, p := range a.prefixes {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// authenticate returns a rejection, or nil and the account whose
// credentials the request carries ("" for the single account, or with no
// credentials configured) when it may pass.
func (s *settings) authenticate(req *plugins.Request) (string, *plugins.WebhookResult) {
	if !s.allow.allows(req.RemoteIP) {
		return "", plugins.RejectForbidden("source address not allowed")
	}
	if len(s.creds) == 0 {
		return "", nil
	}
	got, ok := BasicCredentials(req.Header.Get("Authorization"))
	// Every candidate is compared: the time does not tell which matched.
	account, match := plugins.MatchAccount(s.creds, func(c string) bool { return plugins.EqualSecret(got, c) })
	if !ok || !match {
		res := plugins.Reject(http.StatusUnauthorized, "unauthorized", "missing or invalid credentials")
		res.Answer.Header = http.Header{"Www-Authenticate": {`Basic realm="edge"`}}
		return "", res
	}
	return account, nil
}

// BasicCredentials decodes an "Authorization: Basic ..." header into
// "user:password". The scheme name is case-insensitive and followed by one
// or more spaces (RFC 7617 section 2, RFC 7235 section 2.1): a client that
// sends "basic" holds the same credentials as one that sends "Basic".
func BasicCredentials(header string) (string, bool) {
	scheme, enc, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", false
	}
	dec, err := base64.StdEncoding.DecodeString(strings.Trim(enc, " "))
	if err != nil || !strings.Contains(string(dec), ":") {
		return "", false
	}
	return string(dec), true
}
