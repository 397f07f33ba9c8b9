// Package tls13 is the TLS 1.3 record layer of media sockets whose
// handshake crypto/tls did, and the hand-off between the two: a listener
// whose connections keep their application traffic secrets (in memory,
// from the key log) and watch their records, so that once a socket is
// relayed its records can be taken over (Take) with the right keys and
// sequence numbers and opened and sealed by the relay's loops (Records),
// or given back to crypto/tls. It knows nothing of WebSockets or of the
// loops; anything it cannot account for leaves the connection to
// crypto/tls.
package tls13
