package allocator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// NonceDigest is the part of a nonce's key that names it (Keys.Nonce):
// 128 bits of its SHA-256 in hex, so that every nonce costs Redis the same.
func NonceDigest(nonce string) string {
	sum := sha256.Sum256([]byte(nonce))
	return hex.EncodeToString(sum[:16])
}

// FirstUse records that nonce of scope (a provider) was used and reports
// whether it had not been within ttl, on any replica: one SET NX with a
// TTL, so that of two replicas racing with one nonce only one is first.
// A Redis error is returned wrapped (errors.Is ErrUnavailable): nothing
// may be concluded from it.
func (a *Allocator) FirstUse(ctx context.Context, scope, nonce string, ttl time.Duration) (bool, error) {
	if err := ValidateID("nonce scope", scope); err != nil {
		return false, err
	}
	if nonce == "" || ttl <= 0 {
		return false, fmt.Errorf("%w: a nonce and a positive TTL are required", ErrInvalidID)
	}
	first, err := a.rdb.SetNX(ctx, a.keys.Nonce(scope, NonceDigest(nonce)), "1", ttl).Result()
	if err != nil {
		return false, fmt.Errorf("nonce of %s: %w", scope, unavailable(err))
	}
	return first, nil
}
