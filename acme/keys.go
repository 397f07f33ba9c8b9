package acme

// keys is the Redis schema of this package, all under edge's key prefix
// (redis.key_prefix). The coordinator may move these functions into
// allocator/keys.go; until then they live here, the only place that builds
// them.
//
// The values are private keys: anyone who can read Redis can impersonate
// edge's domains. Redis already holds everything that runs edge's calls and
// must be reachable only by edge (network policy, AUTH/ACL, rediss:// in
// transit); see docs/acme.md.
type keys struct{ prefix string }

// cache (edge) STRING: one autocert.Cache entry, named by autocert:
// "<host>" (PEM private key then certificate chain), "<host>+rsa" (unused:
// edge asks only for ECDSA certificates), "<host>+token" (a tls-alpn-01
// challenge certificate, TTL tokenTTL), "<token>+http-01" (an http-01
// challenge answer, TTL tokenTTL) and "acme_account+key" (the ACME account's
// private key). Certificates and the account key have no TTL: an expired
// certificate is replaced, never served.
func (k keys) cache(name string) string { return k.prefix + "acme:cache:" + name }

// lock (edge) STRING: the issuance lock of one host, a random token with a
// PX TTL of issue_timeout plus a margin while a replica talks to the CA
// (acquire.lua), or "failed" with a PX of the retry backoff after a failed
// issuance, so that no replica asks the CA again before then (release.lua).
func (k keys) lock(host string) string { return k.prefix + "acme:lock:" + host }

// issued (edge) Pub/Sub channel, not a key: release.lua publishes "ok" or
// "failed" on it when an issuance for the host ends, waking the replicas
// that wait for the certificate instead of asking the CA.
func (k keys) issued(host string) string { return k.prefix + "acme:issued:" + host }
