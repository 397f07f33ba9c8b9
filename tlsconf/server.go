package tlsconf

import "crypto/tls"

// suites are Mozilla's "intermediate" TLS 1.2 suites (ECDHE, AEAD only),
// in its order. TLS 1.3 suites are not configurable in Go and are all
// AEAD.
var suites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// ServerConfig is the tls.Config of a listener served from s: TLS 1.2 at
// least, 1.3 whenever the client has it (Go picks the highest common
// version), the suites above, and ALPN "http/1.1" only: media sockets are
// HTTP/1.1 upgrades, which HTTP/2 cannot hijack. extraProtos are added
// after it (e.g. "acme-tls/1" for an ACME TLS-ALPN-01 responder wired
// through Fallback or GetConfigForClient).
func (s *Store) ServerConfig(extraProtos ...string) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		CipherSuites:   suites,
		NextProtos:     append([]string{"http/1.1"}, extraProtos...),
		GetCertificate: s.GetCertificate,
	}
}
