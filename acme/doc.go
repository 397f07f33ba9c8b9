// Package acme obtains and renews the public listener's certificates from an
// ACME CA (Let's Encrypt, or a private CA such as Pebble in tests) with
// golang.org/x/crypto/acme/autocert, keeping the certificate store and the
// issuance lock in Redis so that every replica serves the same certificate
// and only one replica at a time talks to the CA about a host (docs/acme.md).
//
// It owns: the tls.acme configuration (config.go), the autocert.Cache on
// Redis (store.go), the per-host issuance lock with its completion event
// (lock.go, acquire.lua, release.lua), the serving path that answers TLS
// handshakes from memory (manager.go) and, on a miss, reads the store,
// takes the lock or waits for its holder (obtain.go), the single-use
// autocert engine that is the only thing allowed to reach the CA, and only
// while its replica holds the lock (issue.go), and its metrics (metrics.go).
//
// autocert has no lock hook: a Manager that finds no certificate would ask
// the CA from every replica at once, and its renewal timers would too. So the
// long-lived autocert.Manager here only answers challenges (its CA transport
// is closed), and each issuance or renewal runs a fresh autocert.Manager
// whose transport is open only while this replica holds the host's lock. See
// docs/acme.md.
//
// It is a leaf: it imports go-redis and autocert, nothing of edge but
// internal/confcheck. cmd/edge wires GetCertificate, NextProtos and
// HTTPHandler into the listeners and Run into its errgroup.
package acme
