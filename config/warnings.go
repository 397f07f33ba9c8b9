package config

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/edge-voice/edge/api"
	"github.com/edge-voice/edge/tlsconf"
)

// Warnings lists what an operator should fix in a config that loads and
// validates but is unsafe to run with, one sentence each: path (the
// --config file, "" for none) writable by every user, a TLS private key
// readable by every user, a media base that providers refuse, a short
// admin token accepted off loopback. The Watcher logs them at start and
// whenever they change; edge check-config prints them (ArgsWarnings).
func Warnings(c *Config, path string) []string {
	var out []string
	if path != "" {
		// Stat follows the symlinks of a mounted ConfigMap to the file.
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o002 != 0 {
			out = append(out, fmt.Sprintf("config file %s is writable by every user (mode %04o): edge re-reads it every reload.interval, so anyone on this host can change the running config, secrets, trusted_proxies and redis.url included; chmod o-w it", path, fi.Mode().Perm()))
		}
	}
	for _, k := range keyFiles(c) {
		if fi, err := os.Stat(k.path); err == nil && fi.Mode().Perm()&0o004 != 0 {
			out = append(out, fmt.Sprintf("%s %s is readable by every user (mode %04o): whoever reads a TLS private key can impersonate edge; chmod o-r it (deploy/ mounts it 0440)", k.key, k.path, fi.Mode().Perm()))
		}
	}
	if w := plainMediaBase(c.PublicBaseURL); w != "" {
		out = append(out, w)
	}
	if c.AdminAuth.AcceptShortToken && c.ShortAdminTokenExposed() {
		out = append(out, fmt.Sprintf("admin_token is shorter than %d characters (it has %d) on listen.admin %s, which other hosts reach without admin_tls, "+
			"accepted by admin_auth.accept_short_token: each source may guess it admin_auth.failures_per_second times a second, and anyone on the path reads it; "+
			"use a random token of at least %d characters (head -c 32 /dev/urandom | base64)",
			api.MinAdminTokenLen, utf8.RuneCountInString(c.AdminToken), c.Listen.Admin, api.MinAdminTokenLen))
	}
	if c.Listen.MetricsExposed() {
		out = append(out, fmt.Sprintf("listen.metrics %s serves /metrics without credentials to every host that reaches it: "+
			"its series name pods, tiers and merchant pools; keep the port inside the cluster (no load balancer or Ingress to it; "+
			"a NetworkPolicy that admits only Prometheus)", c.Listen.Metrics))
	}
	return out
}

// ArgsWarnings is Warnings for the config file args name (--config), as
// edge check-config shows them.
func ArgsWarnings(c *Config, args []string) []string {
	var path string
	if fl, err := parseFlags(args); err == nil {
		path = fl.path
	}
	return Warnings(c, path)
}

type keyFile struct{ key, path string }

// keyFiles are the TLS private keys c names, with their keys.
func keyFiles(c *Config) []keyFile {
	var out []keyFile
	add := func(prefix string, tc tlsconf.Config) {
		if tc.KeyFile != "" {
			out = append(out, keyFile{prefix + ".key_file", tc.KeyFile})
		}
		for i, p := range tc.Certificates {
			if p.KeyFile != "" {
				out = append(out, keyFile{fmt.Sprintf("%s.certificates[%d].key_file", prefix, i), p.KeyFile})
			}
		}
	}
	add("tls", c.TLS.Config)
	add("admin_tls", c.AdminTLS)
	return out
}

// plainMediaBase warns of an explicit ws:// public_base_url that a
// provider would be told to dial: Twilio refuses a <Stream> URL that is
// not wss:// (error 31922), and the caller's voice would cross the
// internet unencrypted. ws:// on loopback is development and is left be.
func plainMediaBase(base string) string {
	u, err := url.Parse(base)
	if base == "" || err != nil || !strings.EqualFold(u.Scheme, "ws") {
		return ""
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); strings.EqualFold(host, "localhost") || ip != nil && ip.IsLoopback() {
		return ""
	}
	return fmt.Sprintf("public_base_url %s is ws://: providers are told to open media there, Twilio refuses a Stream URL that is not wss:// (error 31922) and the caller's voice would cross the internet unencrypted; set a wss:// URL (TLS by edge, tls.*, or by a load balancer)", base)
}
