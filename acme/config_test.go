package acme

import (
	"github.com/edge-voice/edge/allocator"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestDefaultConfigDisabledIsValid(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if DefaultConfig().DirectoryURL != "https://acme-v02.api.letsencrypt.org/directory" {
		t.Errorf("default directory %q is not Let's Encrypt's production one", DefaultConfig().DirectoryURL)
	}
}

func TestValidate(t *testing.T) {
	valid := func() Config {
		c := DefaultConfig()
		c.Enabled = true
		c.Domains = []string{"edge.example.com", "media.example.com"}
		c.Email = "ops@example.com"
		return c
	}
	tests := map[string]struct {
		mod  func(*Config)
		want string // "" means valid
	}{
		"valid":                {mod: func(*Config) {}},
		"both challenges":      {mod: func(c *Config) { c.Challenges = []string{HTTP01, TLSALPN01} }},
		"no email":             {mod: func(c *Config) { c.Email = "" }},
		"disabled ignores all": {mod: func(c *Config) { *c = Config{} }},
		"no domains":           {mod: func(c *Config) { c.Domains = nil }, want: "tls.acme.domains: must list"},
		"wildcard":             {mod: func(c *Config) { c.Domains = []string{"*.example.com"} }, want: `tls.acme.domains[0]: wildcards need the dns-01`},
		"upper case":           {mod: func(c *Config) { c.Domains[1] = "Media.example.com" }, want: `tls.acme.domains[1]: must be lower case`},
		"single label":         {mod: func(c *Config) { c.Domains = []string{"localhost"} }, want: "at least two labels"},
		"ip address":           {mod: func(c *Config) { c.Domains = []string{"10.0.0.1"} }, want: "not an IP address"},
		"bad character":        {mod: func(c *Config) { c.Domains = []string{"a_b.example.com"} }, want: "ASCII letters"},
		"hyphen edge":          {mod: func(c *Config) { c.Domains = []string{"-a.example.com"} }, want: "hyphen-edged"},
		"empty label":          {mod: func(c *Config) { c.Domains = []string{"a..example.com"} }, want: "empty"},
		"duplicate":            {mod: func(c *Config) { c.Domains[1] = c.Domains[0] }, want: "tls.acme.domains[1]: is listed twice"},
		"mailto email":         {mod: func(c *Config) { c.Email = "mailto:ops@example.com" }, want: "tls.acme.email"},
		"two emails":           {mod: func(c *Config) { c.Email = "a@example.com,b@example.com" }, want: "tls.acme.email"},
		"http directory":       {mod: func(c *Config) { c.DirectoryURL = "http://ca.example.com/dir" }, want: "tls.acme.directory_url"},
		"directory userinfo":   {mod: func(c *Config) { c.DirectoryURL = "https://u:secret@ca.example.com/dir" }, want: "must not carry user info"},
		"zero renew_before":    {mod: func(c *Config) { c.RenewBefore = 0 }, want: "tls.acme.renew_before: must be > 0"},
		"zero issue_timeout":   {mod: func(c *Config) { c.IssueTimeout = 0 }, want: "tls.acme.issue_timeout: must be > 0"},
		"long issue_timeout":   {mod: func(c *Config) { c.IssueTimeout = 6 * time.Minute }, want: "tls.acme.issue_timeout: must be <= 5m"},
		"no challenge":         {mod: func(c *Config) { c.Challenges = nil }, want: "tls.acme.challenges: must list"},
		"dns-01":               {mod: func(c *Config) { c.Challenges = []string{"dns-01"} }, want: `tls.acme.challenges[0]: must be "tls-alpn-01" or "http-01"`},
		"http_listen unused":   {mod: func(c *Config) { c.HTTPListen = "" }},
		"bad http_listen":      {mod: func(c *Config) { c.Challenges = []string{HTTP01}; c.HTTPListen = "80" }, want: `tls.acme.http_listen: "80": missing port`},
		"duplicate challenge":  {mod: func(c *Config) { c.Challenges = []string{HTTP01, HTTP01} }, want: "tls.acme.challenges[1]: is listed twice"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := valid()
			tt.mod(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want it to contain %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("error echoes a password: %v", err)
			}
		})
	}
}

// TestNewCAFile: a missing or PEM-less bundle is an error naming the key.
func TestNewCAFile(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	os.WriteFile(junk, []byte("not a certificate"), 0o600)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, file := range []string{filepath.Join(dir, "missing.pem"), junk} {
		c := DefaultConfig()
		c.Enabled, c.Domains, c.CAFile = true, []string{"edge.example.com"}, file
		_, err := New(c, rdb, allocator.NewKeys("voice:"), nil, nil)
		if err == nil || !strings.Contains(err.Error(), "tls.acme.ca_file") {
			t.Errorf("New with ca_file %s: %v, want an error naming tls.acme.ca_file", file, err)
		}
	}
	c := DefaultConfig()
	if _, err := New(c, rdb, allocator.NewKeys("voice:"), nil, nil); err == nil {
		t.Error("New with ACME disabled succeeded")
	}
}
