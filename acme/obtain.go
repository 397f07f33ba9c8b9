package acme

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"time"
)

// obtain returns a certificate for host better than old (nil: any valid
// one; else one not due): from the store when another replica or an
// earlier run put it there, else from the CA if this replica wins the
// lock, else from the store once the winner says it is there.
func (m *Manager) obtain(ctx context.Context, host string, old *tls.Certificate) (*tls.Certificate, error) {
	kind := kindFirst
	if old != nil {
		kind = kindRenewal
	}
	usable := func(c *tls.Certificate) bool { return c != nil && (old == nil || !m.due(c, m.now())) }
	// Each round either returns or waited for an issuance to end; three
	// rounds cover a holder that died and a lock taken just after.
	for range 3 {
		c, err := m.store.certificate(ctx, host, m.now())
		if err != nil {
			return nil, err
		}
		if usable(c) {
			m.met.adopted.WithLabelValues(kind).Inc()
			return c, nil
		}
		token := newToken()
		holder, err := m.locks.acquire(ctx, host, token, m.cfg.IssueTimeout+lockMargin)
		switch {
		case err != nil:
			return nil, err
		case holder == "":
			return m.issueLocked(ctx, host, token, kind, usable)
		case holder == resultFailed:
			return nil, fmt.Errorf("%w: %s", ErrRecentFailure, host)
		}
		if err := m.wait(ctx, host, holder); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("acme certificate for %s: not in the store after other replicas' issuances", host)
}

// issueLocked asks the CA for host's certificate while this replica holds
// the lock with token, then releases it with the result.
func (m *Manager) issueLocked(ctx context.Context, host, token, kind string, usable func(*tls.Certificate) bool) (c *tls.Certificate, err error) {
	deadline := m.now().Add(m.cfg.IssueTimeout)
	result := resultFailed
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, rerr := m.locks.release(rctx, host, token, result, m.retryAfter); rerr != nil {
			m.log.Warn("acme: lock not released; it expires by itself", "host", host, "err", rerr)
		}
	}()
	// Another replica may have stored one between our read and the lock.
	if c, err := m.store.certificate(ctx, host, m.now()); err != nil {
		return nil, err
	} else if usable(c) {
		m.met.adopted.WithLabelValues(kind).Inc()
		result = resultOK
		return c, nil
	}
	c, err = m.issue(ctx, host, deadline)
	if err != nil {
		m.met.issuances.WithLabelValues(kind, "error").Inc()
		return nil, err
	}
	m.met.issuances.WithLabelValues(kind, "ok").Inc()
	m.log.Info("acme: certificate obtained", "host", host, "kind", kind, "not_after", c.Leaf.NotAfter)
	result = resultOK
	return c, nil
}

// wait blocks until the issuance of the replica holding host's lock with
// value seen ends. It subscribes before looking at the lock again, so that
// an end between the failed acquire and the subscription is not missed.
func (m *Manager) wait(ctx context.Context, host, seen string) error {
	ps, err := m.locks.subscribe(ctx, host)
	if err != nil {
		return err
	}
	defer ps.Close()
	cur, err := m.locks.holder(ctx, host)
	if err != nil {
		return err
	}
	if cur != seen {
		m.met.waits.WithLabelValues("done").Inc()
		return nil
	}
	msg, err := ps.ReceiveMessage(ctx)
	switch {
	case err != nil:
		m.met.waits.WithLabelValues("timeout").Inc()
		return fmt.Errorf("acme certificate for %s: waiting for another replica's issuance: %w", host, err)
	case msg.Payload == resultFailed:
		m.met.waits.WithLabelValues("failed").Inc()
		return fmt.Errorf("%w: %s (on another replica)", ErrRecentFailure, host)
	}
	m.met.waits.WithLabelValues("done").Inc()
	return nil
}

func newToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
