// Package confcheck formats the errors of every component's Config.Validate
// the same way: the full key path, the problem, and the bad value
// (`allocator.lease_ttl: must be > 0 (got "0s")`). It is a leaf that
// allocator and proxy may import without depending on the rest of edge.
package confcheck

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Redacted is what a secret shows as in logs, errors and check-config.
const Redacted = "[redacted]"

// Invalid reports a value outside its constraint.
func Invalid(path string, value any, problem string) error {
	return fmt.Errorf("%s: %s (got %s)", path, problem, Show(value))
}

// Show quotes strings and durations and prints numbers bare.
func Show(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case time.Duration:
		return fmt.Sprintf("%q", v.String())
	default:
		return fmt.Sprint(v)
	}
}

// Positive reports durations that must be > 0.
func Positive(path string, d time.Duration) error {
	if d <= 0 {
		return Invalid(path, d, "must be > 0")
	}
	return nil
}

// HostPort checks a "host:port" address and returns its parts. The problem
// text drops the stdlib's " in address" suffix:
// `pods.static[2].address: "foo": missing port`.
func HostPort(path, addr string, minPort int) (host string, port int, err error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		msg := err.Error()
		var ae *net.AddrError
		if errors.As(err, &ae) {
			msg = strings.TrimSuffix(ae.Err, " in address")
		}
		return "", 0, fmt.Errorf("%s: %q: %s", path, addr, msg)
	}
	port, ok := parsePort(p)
	if !ok || port < minPort {
		return "", 0, fmt.Errorf("%s: %q: port must be a number %d-65535", path, addr, minPort)
	}
	return host, port, nil
}

func parsePort(s string) (int, bool) {
	if s == "" || len(s) > 5 {
		return 0, false
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n <= 65535
}
