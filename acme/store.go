package acme

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/crypto/acme/autocert"
)

// tokenTTL bounds how long a challenge answer outlives a replica that died
// mid-issuance: autocert deletes it when the order ends.
const tokenTTL = time.Hour

// maxEntryBytes bounds what Get accepts: a P-256 key and a chain of a few
// certificates are a few KiB. A larger value is not autocert's.
const maxEntryBytes = 64 << 10

// Store is an autocert.Cache in Redis, shared by every replica, so that a
// certificate one replica obtained is served by all of them and survives
// restarts. Its values hold private keys: see keys.cache.
type Store struct {
	rdb  redis.UniversalClient
	keys keys
}

var _ autocert.Cache = (*Store)(nil)

// NewStore keeps entries under prefix (edge's redis.key_prefix).
func NewStore(rdb redis.UniversalClient, ks Keys) *Store {
	return &Store{rdb: rdb, keys: keys{ks}}
}

// Get returns the entry, autocert.ErrCacheMiss when there is none, or the
// Redis error (which autocert passes on: the handshake fails, no CA call).
func (s *Store) Get(ctx context.Context, name string) ([]byte, error) {
	b, err := s.rdb.Get(ctx, s.keys.cache(name)).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, autocert.ErrCacheMiss
	case err != nil:
		return nil, fmt.Errorf("acme cache get %s: %w", name, err)
	case len(b) > maxEntryBytes:
		return nil, fmt.Errorf("acme cache get %s: %d bytes, more than %d", name, len(b), maxEntryBytes)
	}
	return b, nil
}

// Put stores the entry; challenge answers expire after tokenTTL.
func (s *Store) Put(ctx context.Context, name string, data []byte) error {
	var ttl time.Duration
	if strings.HasSuffix(name, "+token") || strings.HasSuffix(name, "+http-01") {
		ttl = tokenTTL
	}
	if err := s.rdb.Set(ctx, s.keys.cache(name), data, ttl).Err(); err != nil {
		return fmt.Errorf("acme cache put %s: %w", name, err)
	}
	return nil
}

// Delete removes the entry; a missing one is not an error.
func (s *Store) Delete(ctx context.Context, name string) error {
	if err := s.rdb.Del(ctx, s.keys.cache(name)).Err(); err != nil {
		return fmt.Errorf("acme cache delete %s: %w", name, err)
	}
	return nil
}

// certificate loads host's certificate as autocert stored it: nil (and no
// error) when there is none or it is unusable at now (corrupt, expired, not
// for host, key not matching), so the caller obtains a new one.
func (s *Store) certificate(ctx context.Context, host string, now time.Time) (*tls.Certificate, error) {
	b, err := s.Get(ctx, host)
	if errors.Is(err, autocert.ErrCacheMiss) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c, err := parseEntry(b, host, now)
	if err != nil {
		return nil, nil // unusable is a miss: a new certificate replaces it
	}
	return c, nil
}

// parseEntry reads autocert's format (the private key PEM block, then the
// chain's CERTIFICATE blocks, leaf first) and checks the pair is usable for
// host at now.
func parseEntry(b []byte, host string, now time.Time) (*tls.Certificate, error) {
	var keyPEM, certPEM []byte
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		enc := pem.EncodeToMemory(blk)
		if strings.Contains(blk.Type, "PRIVATE KEY") {
			keyPEM = append(keyPEM, enc...)
		} else if blk.Type == "CERTIFICATE" {
			certPEM = append(certPEM, enc...)
		}
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	leaf := c.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, err
		}
		c.Leaf = leaf
	}
	if now.Before(leaf.NotBefore) || !now.Before(leaf.NotAfter) {
		return nil, fmt.Errorf("certificate for %s is not valid at %s", host, now.UTC().Format(time.RFC3339))
	}
	if err := leaf.VerifyHostname(host); err != nil {
		return nil, err
	}
	return &c, nil
}
