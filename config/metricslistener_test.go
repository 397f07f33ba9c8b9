package config

import (
	"strings"
	"testing"
)

// listen.metrics (off by default) serves /metrics without credentials for
// a scrape configuration that sends none, such as the predecessor's: an
// address is checked like the other listeners' (host:port, no port shared
// with another listener), and one that other hosts reach is warned of.
func TestListenMetricsIsValidatedAndWarnedOf(t *testing.T) {
	tests := map[string]struct {
		metrics, admin string
		err            string // substring of Validate's error; "" valid
		warn           bool
	}{
		"off by default":             {},
		"loopback":                   {metrics: "127.0.0.1:9095"},
		"the predecessor's port":     {metrics: ":9090", admin: "127.0.0.1:9091", warn: true},
		"not an address":             {metrics: "metrics", err: "listen.metrics"},
		"the admin listener's port":  {metrics: ":9090", err: `listen.metrics: must not share port 9090 with listen.admin`},
		"the public listener's port": {metrics: "0.0.0.0:8080", err: `listen.metrics: must not share port 8080 with listen.public`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := Default()
			c.Listen.Metrics = tc.metrics
			if tc.admin != "" {
				c.Listen.Admin = tc.admin
			}
			err := c.Validate()
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("Validate() = %v, want an error with %q", err, tc.err)
			}
			warned := strings.Contains(strings.Join(Warnings(c, ""), "\n"), "listen.metrics "+tc.metrics+" serves /metrics without credentials")
			if tc.err == "" && warned != tc.warn {
				t.Errorf("warned = %v, want %v (warnings %q)", warned, tc.warn, Warnings(c, ""))
			}
		})
	}
}
