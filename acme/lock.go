package acme

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Issuance results, as release.lua publishes them.
const (
	resultOK     = "ok"
	resultFailed = "failed"
)

var (
	//go:embed acquire.lua
	acquireSrc    string
	acquireScript = redis.NewScript(acquireSrc)

	//go:embed release.lua
	releaseSrc    string
	releaseScript = redis.NewScript(releaseSrc)
)

// locks is the per-host issuance lock: at most one replica at a time asks
// the CA about a host, the others wait for its event on the host's channel.
type locks struct {
	rdb  redis.UniversalClient
	keys keys
}

// acquire takes host's lock with token for ttl. It returns "" when this
// replica now holds it, else the current holder's value ("failed" during
// the backoff after a failed issuance).
func (l locks) acquire(ctx context.Context, host, token string, ttl time.Duration) (string, error) {
	v, err := acquireScript.Run(ctx, l.rdb, []string{l.keys.lock(host)}, token, ttl.Milliseconds()).Text()
	if err != nil {
		return "", fmt.Errorf("acme lock %s: %w", host, err)
	}
	return v, nil
}

// release ends this replica's issuance with result (resultOK or
// resultFailed, which keeps every replica from the CA for backoff) and
// wakes the waiters. It reports whether the lock was still this replica's.
func (l locks) release(ctx context.Context, host, token, result string, backoff time.Duration) (bool, error) {
	n, err := releaseScript.Run(ctx, l.rdb, []string{l.keys.lock(host)},
		token, result, backoff.Milliseconds(), l.keys.issued(host)).Int()
	if err != nil {
		return false, fmt.Errorf("acme unlock %s: %w", host, err)
	}
	return n == 1, nil
}

// holder is the lock's value, "" when nobody holds it.
func (l locks) holder(ctx context.Context, host string) (string, error) {
	v, err := l.rdb.Get(ctx, l.keys.lock(host)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("acme lock %s: %w", host, err)
	}
	return v, nil
}

// subscribe listens on host's channel; the subscription is confirmed when it
// returns, so an event published afterwards is not missed.
func (l locks) subscribe(ctx context.Context, host string) (*redis.PubSub, error) {
	ps := l.rdb.Subscribe(ctx, l.keys.issued(host))
	if _, err := ps.Receive(ctx); err != nil {
		ps.Close()
		return nil, fmt.Errorf("acme subscribe %s: %w", host, err)
	}
	return ps, nil
}
