package acme

// Keys is where this package's Redis keys come from: edge's one key
// schema (allocator.Keys, where each key is documented). Declared here, by
// its consumer, so that acme stays a leaf.
//
// The values are private keys: anyone who can read Redis can impersonate
// edge's domains. Redis already holds everything that runs edge's calls and
// must be reachable only by edge (network policy, AUTH/ACL, rediss:// in
// transit); see docs/acme.md.
type Keys interface {
	// ACMECache is one autocert.Cache entry.
	ACMECache(name string) string
	// ACMELock is the issuance lock of one host.
	ACMELock(host string) string
	// ACMEIssued is the Pub/Sub channel announcing the end of an issuance.
	ACMEIssued(host string) string
}

// keys gives Keys the short names the package uses.
type keys struct{ Keys }

func (k keys) cache(name string) string  { return k.ACMECache(name) }
func (k keys) lock(host string) string   { return k.ACMELock(host) }
func (k keys) issued(host string) string { return k.ACMEIssued(host) }
