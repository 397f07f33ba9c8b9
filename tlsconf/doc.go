// Package tlsconf owns edge's own TLS termination: the tls.* settings
// (certificate/key files, extra pairs chosen by SNI), a Store that serves
// them and re-reads them when they change on disk (cert-manager rotates a
// mounted Secret by swapping a symlink, as Kubernetes does for the config
// file: the Store polls and compares content hashes, exactly like
// config.Watcher), the certificate expiry and reload metrics, and the
// tls.Config every TLS listener of edge uses (TLS 1.2 minimum, Mozilla
// "intermediate" suites, TLS 1.3 preferred).
//
// A second certificate source (an ACME manager) plugs in as Store.Fallback,
// consulted for a ServerName no file pair names, and first for a hello
// offering ALPNACME (TLS-ALPN-01 validation); that protocol joins through
// ServerConfig's extra protocols.
package tlsconf
