package forwarded_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/edge-voice/edge/forwarded"
)

func request(remote string, headers ...string) *http.Request {
	r := httptest.NewRequest("GET", "http://edge.example.com/x", nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Add(headers[i], headers[i+1])
	}
	return r
}

func TestClientIPAndHeaders(t *testing.T) {
	lb, err := forwarded.Parse("trusted_proxies", []string{"10.0.0.0/8", "fd00::1"})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		trusted              *forwarded.Trusted
		r                    *http.Request
		ip, xff, proto, host string
	}{
		"nobody trusted: headers ignored": {
			nil, request("203.0.113.9:4000", "X-Forwarded-For", "1.2.3.4", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "evil.example"),
			"203.0.113.9", "203.0.113.9", "http", "edge.example.com",
		},
		"direct client spoofing behind a trusted list": {
			lb, request("203.0.113.9:4000", "X-Forwarded-For", "10.1.1.1", "X-Forwarded-Proto", "https"),
			"203.0.113.9", "203.0.113.9", "http", "edge.example.com",
		},
		"through the load balancer": {
			lb, request("10.0.0.2:4000", "X-Forwarded-For", "198.51.100.7", "X-Forwarded-Proto", "HTTPS", "X-Forwarded-Host", "calls.example.com"),
			"198.51.100.7", "198.51.100.7, 10.0.0.2", "https", "calls.example.com",
		},
		"a client-set entry left of the real one is not believed": {
			lb, request("10.0.0.2:4000", "X-Forwarded-For", "1.1.1.1, 198.51.100.7"),
			"198.51.100.7", "1.1.1.1, 198.51.100.7, 10.0.0.2", "http", "edge.example.com",
		},
		"two trusted hops": {
			lb, request("10.0.0.2:4000", "X-Forwarded-For", "198.51.100.7", "X-Forwarded-For", "10.9.9.9"),
			"198.51.100.7", "198.51.100.7, 10.9.9.9, 10.0.0.2", "http", "edge.example.com",
		},
		"ipv6 host entry": {
			lb, request("[fd00::1]:4000", "X-Forwarded-For", "2001:db8::5"),
			"2001:db8::5", "2001:db8::5, fd00::1", "http", "edge.example.com",
		},
		"garbage entry stops the walk": {
			lb, request("10.0.0.2:4000", "X-Forwarded-For", "not-an-ip"),
			"10.0.0.2", "not-an-ip, 10.0.0.2", "http", "edge.example.com",
		},
		"forwarded host that could break a URL": {
			lb, request("10.0.0.2:4000", "X-Forwarded-Host", "a.example/@b"),
			"10.0.0.2", "10.0.0.2", "http", "edge.example.com",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if ip := tc.trusted.ClientIP(tc.r); ip.String() != tc.ip {
				t.Errorf("ClientIP = %s, want %s", ip, tc.ip)
			}
			xff, proto, host := tc.trusted.Headers(tc.r)
			if xff != tc.xff || proto != tc.proto || host != tc.host {
				t.Errorf("Headers = %q %q %q, want %q %q %q", xff, proto, host, tc.xff, tc.proto, tc.host)
			}
		})
	}
}

func TestParse(t *testing.T) {
	if _, err := forwarded.Parse("trusted_proxies", []string{"10.0.0.0/8", "not-a-net"}); err == nil || err.Error() != `trusted_proxies[1]: "not-a-net": not a CIDR or an IP address` {
		t.Errorf("bad entry: %v", err)
	}
	all, _ := forwarded.Parse("p", []string{"::/0"})
	some, _ := forwarded.Parse("p", []string{"10.0.0.0/8"})
	if !all.TrustsAll() || some.TrustsAll() || (*forwarded.Trusted)(nil).TrustsAll() {
		t.Error("TrustsAll is wrong")
	}
}
