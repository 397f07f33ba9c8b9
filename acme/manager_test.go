package acme

import (
	"context"
	"crypto/tls"
	"errors"
	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/internal/testpebble"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/internal/testredis"
)

const (
	hostA  = "a.edge.test"
	hostB  = "b.edge.test"
	prefix = "{t}:"
)

// replica is one edge replica's ACME side on the shared Redis.
type replica struct {
	m    *Manager
	reg  *prometheus.Registry
	addr string // its TLS listener, when served
}

func newReplica(t *testing.T, p *testpebble.CA, rdb redis.UniversalClient, mod func(*Config)) *replica {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Enabled = true
	cfg.Domains = []string{hostA, hostB}
	cfg.DirectoryURL = p.Directory
	cfg.CAFile = p.CAFile
	cfg.IssueTimeout = 30 * time.Second
	if mod != nil {
		mod(&cfg)
	}
	reg := prometheus.NewRegistry()
	m, err := New(cfg, rdb, allocator.NewKeys(prefix), nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	return &replica{m: m, reg: reg}
}

// serve gives the replica a TLS listener of its own.
func (r *replica) serve(t *testing.T) *replica {
	l, _ := listen(t)
	r.addr = serveTLS(t, l, r.m)
	return r
}

func (r *replica) count(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue metric
				}
			}
			if m.Counter != nil {
				sum += m.Counter.GetValue()
			} else if m.Gauge != nil {
				sum += m.Gauge.GetValue()
			}
		}
	}
	return sum
}

// TestFirstIssuanceTLSALPN: the first handshake for a domain makes edge
// order a certificate that Pebble issues after a real tls-alpn-01
// validation against edge's own listener; the handshake gets it, chained
// to Pebble's root, and it is in Redis.
func TestFirstIssuanceTLSALPN(t *testing.T) {
	l, port := listen(t)
	p := testpebble.Start(t, testpebble.Opts{TLSPort: port})
	rdb := testredis.Start(t).Client()
	r := newReplica(t, p, rdb, nil)
	addr := serveTLS(t, l, r.m)

	leaf, err := handshake(t, addr, hostA, p.Roots)
	if err != nil {
		t.Fatalf("first handshake: %v", err)
	}
	if err := leaf.VerifyHostname(hostA); err != nil {
		t.Fatal(err)
	}
	if got := p.Orders.Load(); got != 1 {
		t.Errorf("orders at the CA = %d, want 1", got)
	}
	if got := r.count(t, "edge_acme_issuances_total", "kind", "first", "result", "ok"); got != 1 {
		t.Errorf("issuances{first,ok} = %v, want 1", got)
	}
	stored, err := r.m.store.certificate(context.Background(), hostA, time.Now())
	if err != nil || stored == nil {
		t.Fatalf("certificate in Redis: %v, %v", stored, err)
	}
	if serial(stored.Leaf) != serial(leaf) {
		t.Errorf("stored serial %s, served %s", serial(stored.Leaf), serial(leaf))
	}
	// The next handshake is answered from memory: no Redis, no CA.
	before := p.Requests.Load()
	again, err := handshake(t, addr, hostA, p.Roots)
	if err != nil || serial(again) != serial(leaf) {
		t.Fatalf("second handshake: %v (serial %v)", err, again)
	}
	if p.Requests.Load() != before {
		t.Errorf("the second handshake reached the CA")
	}
	if got := r.count(t, "edge_acme_cache_hits_total"); got != 1 {
		t.Errorf("cache hits = %v, want 1", got)
	}
	// The challenge answer is gone from Redis once the order is done.
	waitGone(t, rdb, r.m.store.keys.cache(hostA+"+token"))
}

// waitGone waits for autocert's asynchronous cleanup of a key, which has
// no event to await.
func waitGone(t *testing.T, rdb *redis.Client, key string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for rdb.Exists(context.Background(), key).Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%s still in Redis", key)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestChallengeAnsweredByAnotherReplica: the CA's validation lands on a
// replica that did not order (behind a load balancer it may reach any):
// that replica answers it from the challenge certificate in Redis.
func TestChallengeAnsweredByAnotherReplica(t *testing.T) {
	lOther, port := listen(t)
	p := testpebble.Start(t, testpebble.Opts{TLSPort: port})
	rdb := testredis.Start(t).Client()
	orderer := newReplica(t, p, rdb, nil).serve(t)
	other := newReplica(t, p, rdb, nil)
	serveTLS(t, lOther, other.m)

	if _, err := handshake(t, orderer.addr, hostA, p.Roots); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if got := other.count(t, "edge_acme_issuances_total"); got != 0 {
		t.Errorf("the validated replica ordered %v certificates", got)
	}
}

// TestHTTP01: with only http-01, the CA's check on port 80 is answered by
// HTTPHandler (here from another replica, through Redis) and the
// certificate is issued. autocert tries tls-alpn-01 first, which fails
// because the listener does not offer acme-tls/1: one extra order.
func TestHTTP01(t *testing.T) {
	l80, httpPort := listen(t)
	lTLS, tlsPort := listen(t)
	p := testpebble.Start(t, testpebble.Opts{TLSPort: tlsPort, HTTPPort: httpPort})
	rdb := testredis.Start(t).Client()
	only := func(c *Config) { c.Challenges = []string{HTTP01} }
	r := newReplica(t, p, rdb, only)
	if got := r.m.NextProtos(); len(got) != 0 {
		t.Fatalf("NextProtos with http-01 only = %v", got)
	}
	addr := serveTLS(t, lTLS, r.m)
	other := newReplica(t, p, rdb, only)
	fallback := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "fallback") })
	srv := &http.Server{Handler: other.m.HTTPHandler(fallback)}
	go srv.Serve(l80)
	t.Cleanup(func() { srv.Close() })

	if _, err := handshake(t, addr, hostA, p.Roots); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if got := p.Orders.Load(); got != 2 {
		t.Errorf("orders = %d, want 2 (tls-alpn-01 refused, then http-01)", got)
	}
	res, err := http.Get("http://" + l80.Addr().String() + "/other")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(b) != "fallback" {
		t.Errorf("non-challenge request got %q, want the fallback's answer", b)
	}
}

// TestSecondReplicaFromStore: a replica started after another obtained the
// certificate serves the same one, from Redis, without asking the CA.
func TestSecondReplicaFromStore(t *testing.T) {
	p := testpebble.Start(t, testpebble.Opts{AlwaysValid: true})
	rdb := testredis.Start(t).Client()
	first := newReplica(t, p, rdb, nil).serve(t)
	leaf, err := handshake(t, first.addr, hostA, p.Roots)
	if err != nil {
		t.Fatal(err)
	}
	caRequests := p.Requests.Load()

	second := newReplica(t, p, rdb, nil).serve(t)
	got, err := handshake(t, second.addr, hostA, p.Roots)
	if err != nil {
		t.Fatal(err)
	}
	if serial(got) != serial(leaf) {
		t.Errorf("second replica serves serial %s, first %s", serial(got), serial(leaf))
	}
	if n := p.Requests.Load() - caRequests; n != 0 {
		t.Errorf("second replica made %d requests to the CA, want 0", n)
	}
	if n := second.count(t, "edge_acme_store_loads_total", "kind", "first"); n != 1 {
		t.Errorf("store loads = %v, want 1", n)
	}
}

// TestConcurrentFirstHandshakes: handshakes for one new domain on two
// replicas at once cause exactly one order; all get the same certificate.
func TestConcurrentFirstHandshakes(t *testing.T) {
	p := testpebble.Start(t, testpebble.Opts{AlwaysValid: true})
	rdb := testredis.Start(t).Client()
	reps := []*replica{newReplica(t, p, rdb, nil).serve(t), newReplica(t, p, rdb, nil).serve(t)}

	const perReplica = 4
	go1 := make(chan struct{})
	serials := make(chan string, 2*perReplica)
	var wg sync.WaitGroup
	for _, r := range reps {
		for range perReplica {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-go1
				leaf, err := handshake(t, r.addr, hostB, p.Roots)
				if err != nil {
					t.Errorf("handshake: %v", err)
					return
				}
				serials <- serial(leaf)
			}()
		}
	}
	close(go1)
	wg.Wait()
	close(serials)
	var first string
	for s := range serials {
		if first == "" {
			first = s
		}
		if s != first {
			t.Errorf("serials differ: %s and %s", first, s)
		}
	}
	if got := p.Orders.Load(); got != 1 {
		t.Errorf("orders = %d, want exactly 1", got)
	}
	issued := reps[0].count(t, "edge_acme_issuances_total") + reps[1].count(t, "edge_acme_issuances_total")
	if issued != 1 {
		t.Errorf("issuances over both replicas = %v, want 1", issued)
	}
}

// TestLoserWaitsForEvent: a replica that finds the lock held waits for the
// holder's event on Redis and then serves the stored certificate; it never
// asks the CA. A "failed" event ends the wait with ErrRecentFailure at
// once, and the backoff keeps it from the CA.
func TestLoserWaitsForEvent(t *testing.T) {
	p := testpebble.Start(t, testpebble.Opts{AlwaysValid: true})
	rs := testredis.Start(t)
	rdb := rs.Client()
	ctx := context.Background()
	holder := newReplica(t, p, rdb, nil).serve(t)
	leaf, err := handshake(t, holder.addr, hostA, p.Roots)
	if err != nil {
		t.Fatal(err)
	}
	k := holder.m.store.keys
	entry, err := rdb.Get(ctx, k.cache(hostA)).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	// Play a holder mid-issuance: the certificate not stored yet, the lock
	// taken with a token.
	rdb.Del(ctx, k.cache(hostA))
	const token = "holder-token"
	if v, err := holder.m.locks.acquire(ctx, hostA, token, time.Minute); err != nil || v != "" {
		t.Fatalf("acquire: %q, %v", v, err)
	}
	waiter := newReplica(t, p, rdb, nil).serve(t)
	caRequests := p.Requests.Load()
	type res struct {
		serial string
		err    error
	}
	done := make(chan res, 1)
	go func() {
		got, err := handshake(t, waiter.addr, hostA, p.Roots)
		if err != nil {
			done <- res{err: err}
			return
		}
		done <- res{serial: serial(got)}
	}()
	awaitSubscriber(t, rdb, k.issued(hostA))
	if err := rdb.Set(ctx, k.cache(hostA), entry, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if held, err := holder.m.locks.release(ctx, hostA, token, resultOK, time.Minute); err != nil || !held {
		t.Fatalf("release: %v, %v", held, err)
	}
	r := <-done
	if r.err != nil || r.serial != serial(leaf) {
		t.Fatalf("waiter got %q, %v; want serial %s", r.serial, r.err, serial(leaf))
	}
	if n := p.Requests.Load() - caRequests; n != 0 {
		t.Errorf("the waiting replica made %d CA requests", n)
	}
	if n := waiter.count(t, "edge_acme_lock_waits_total", "result", "done"); n != 1 {
		t.Errorf("waits{done} = %v, want 1", n)
	}

	// Now a holder that fails, for hostB.
	if v, err := holder.m.locks.acquire(ctx, hostB, token, time.Minute); err != nil || v != "" {
		t.Fatalf("acquire: %q, %v", v, err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := waiter.m.GetCertificate(&tls.ClientHelloInfo{ServerName: hostB})
		errc <- err
	}()
	awaitSubscriber(t, rdb, k.issued(hostB))
	if _, err := holder.m.locks.release(ctx, hostB, token, resultFailed, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrRecentFailure) {
		t.Fatalf("after a failed issuance: %v, want ErrRecentFailure", err)
	}
	// Within the backoff, nobody asks the CA.
	if _, err := waiter.m.GetCertificate(&tls.ClientHelloInfo{ServerName: hostB}); !errors.Is(err, ErrRecentFailure) {
		t.Fatalf("within the backoff: %v, want ErrRecentFailure", err)
	}
	if n := p.Requests.Load() - caRequests; n != 0 {
		t.Errorf("CA requests during the backoff: %d", n)
	}
}

// awaitSubscriber waits until a replica listens on channel (PUBSUB NUMSUB):
// the moment a waiter is parked on the event.
func awaitSubscriber(t *testing.T, rdb *redis.Client, channel string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := rdb.PubSubNumSub(context.Background(), channel).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n[channel] > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nobody subscribed to %s", channel)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHostNotAllowed: a name outside tls.acme.domains is refused before
// Redis or the CA is asked.
func TestHostNotAllowed(t *testing.T) {
	p := testpebble.Start(t, testpebble.Opts{AlwaysValid: true})
	rs := testredis.Start(t)
	r := newReplica(t, p, rs.Client(), nil).serve(t)
	rt := &testredis.RoundTrips{}
	r.m.store.rdb.(*redis.Client).AddHook(rt)
	for _, name := range []string{"evil.example.com", "A.EDGE.TEST.evil.com", "127.0.0.1", ""} {
		if _, err := handshake(t, r.addr, name, p.Roots); err == nil {
			t.Errorf("handshake for %q succeeded", name)
		}
	}
	if _, err := r.m.GetCertificate(&tls.ClientHelloInfo{ServerName: "evil.example.com"}); !errors.Is(err, ErrHostNotAllowed) {
		t.Errorf("GetCertificate: %v, want ErrHostNotAllowed", err)
	}
	if p.Requests.Load() != 0 || rt.Load() != 0 {
		t.Errorf("refused names reached the CA (%d requests) or Redis (%d round trips)", p.Requests.Load(), rt.Load())
	}
	if got := r.count(t, "edge_acme_handshakes_refused_total", "reason", "host"); got < 4 {
		t.Errorf("refused{host} = %v, want >= 4", got)
	}
}

// TestRedisDown: with Redis gone, a handshake that needs Redis fails with
// an error (no panic, no CA call, bounded); one whose certificate is held
// in memory is still served.
func TestRedisDown(t *testing.T) {
	p := testpebble.Start(t, testpebble.Opts{AlwaysValid: true})
	rs := testredis.Start(t)
	r := newReplica(t, p, rs.Client(), nil).serve(t)
	leaf, err := handshake(t, r.addr, hostA, p.Roots)
	if err != nil {
		t.Fatal(err)
	}
	rs.Kill()
	caRequests := p.Requests.Load()

	start := time.Now()
	if _, err := handshake(t, r.addr, hostB, p.Roots); err == nil {
		t.Fatal("handshake for a new domain succeeded with Redis down")
	}
	_, err = r.m.GetCertificate(&tls.ClientHelloInfo{ServerName: hostB})
	if err == nil || errors.Is(err, ErrHostNotAllowed) {
		t.Fatalf("GetCertificate with Redis down: %v", err)
	}
	t.Logf("error with Redis down: %v (after %s)", err, time.Since(start))
	if p.Requests.Load() != caRequests {
		t.Errorf("the CA was asked while Redis was down")
	}
	got, err := handshake(t, r.addr, hostA, p.Roots)
	if err != nil || serial(got) != serial(leaf) {
		t.Fatalf("held certificate with Redis down: %v", err)
	}
	if n := r.count(t, "edge_acme_handshakes_refused_total", "reason", "unavailable"); n < 1 {
		t.Errorf("refused{unavailable} = %v", n)
	}
}

// TestRenewal: certificates that live 8s with renew_before capped at half
// their life are renewed by one replica while both run; the other takes
// the renewed certificate from Redis. Every order at the CA is one
// replica's issuance: no two replicas renew the same certificate.
func TestRenewal(t *testing.T) {
	p := testpebble.Start(t, testpebble.Opts{AlwaysValid: true, ValiditySeconds: 8})
	rdb := testredis.Start(t).Client()
	one := func(c *Config) { c.Domains = []string{hostA}; c.RenewBefore = time.Hour }
	reps := []*replica{newReplica(t, p, rdb, one), newReplica(t, p, rdb, one)}
	type seen struct {
		rep    int
		serial string
	}
	events := make(chan seen, 64)
	for i, r := range reps {
		r.m.checkEvery = 50 * time.Millisecond
		r.m.observe = func(_ string, c *tls.Certificate) {
			select {
			case events <- seen{i, serial(c.Leaf)}:
			default:
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, r := range reps {
		wg.Add(1)
		go func() { defer wg.Done(); r.m.Run(ctx) }()
	}
	stop := func() { cancel(); wg.Wait() }
	defer stop()

	// Both replicas serve a first certificate, then both a second one.
	serving := map[int]string{}
	var firstSerial string
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e := <-events:
			serving[e.rep] = e.serial
			if firstSerial == "" {
				firstSerial = e.serial
			}
		case <-timeout:
			t.Fatalf("no renewal served by both replicas; serving %v", serving)
		}
		if len(serving) == 2 && serving[0] == serving[1] && serving[0] != firstSerial {
			break
		}
	}
	stop()
	renewed := serving[0]
	orders := p.Orders.Load()
	var issued, renewals, loads float64
	for _, r := range reps {
		issued += r.count(t, "edge_acme_issuances_total", "result", "ok")
		renewals += r.count(t, "edge_acme_issuances_total", "kind", "renewal", "result", "ok")
		loads += r.count(t, "edge_acme_store_loads_total", "kind", "renewal")
	}
	if orders < 2 || float64(orders) != issued {
		t.Errorf("orders at the CA = %d, issuances over both replicas = %v: want equal, >= 2", orders, issued)
	}
	if renewals < 1 || loads < 1 {
		t.Errorf("renewal issuances = %v, renewals loaded from Redis = %v: want >= 1 each", renewals, loads)
	}
	for i, r := range reps {
		c, _ := r.m.current(hostA)
		if c == nil || serial(c.Leaf) != renewed {
			t.Errorf("replica %d does not hold the renewed certificate %s", i, renewed)
		}
	}
}

// TestEnginesNeverRenewOnTheirOwn: the autocert.Manager that ordered a
// certificate starts its own renewal timer (at two thirds of the
// lifetime); when it fires, outside any lock, its request is refused and
// the CA sees no order.
func TestEnginesNeverRenewOnTheirOwn(t *testing.T) {
	p := testpebble.Start(t, testpebble.Opts{AlwaysValid: true, ValiditySeconds: 4})
	rdb := testredis.Start(t).Client()
	r := newReplica(t, p, rdb, nil).serve(t)
	if _, err := handshake(t, r.addr, hostA, p.Roots); err != nil {
		t.Fatal(err)
	}
	orders := p.Orders.Load()
	deadline := time.Now().Add(20 * time.Second)
	for r.count(t, "edge_acme_ca_requests_refused_total") == 0 && p.Orders.Load() == orders {
		if time.Now().After(deadline) {
			t.Fatal("autocert's renewal timer never tried the CA")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := p.Orders.Load(); got != orders {
		t.Errorf("orders went from %d to %d without edge renewing", orders, got)
	}
}

// TestFailedIssuanceBacksOffEveryReplica: when the CA refuses (its
// validation finds nothing listening), the handshake fails, and for the
// backoff neither this replica nor another asks the CA again.
func TestFailedIssuanceBacksOffEveryReplica(t *testing.T) {
	l, port := listen(t)
	l.Close() // the VA's tls-alpn-01 check finds a closed port
	p := testpebble.Start(t, testpebble.Opts{TLSPort: port})
	rdb := testredis.Start(t).Client()
	first := newReplica(t, p, rdb, nil).serve(t)
	if _, err := handshake(t, first.addr, hostA, p.Roots); err == nil {
		t.Fatal("handshake succeeded without a valid challenge")
	}
	if got := first.count(t, "edge_acme_issuances_total", "kind", "first", "result", "error"); got != 1 {
		t.Errorf("issuances{first,error} = %v, want 1", got)
	}
	orders := p.Orders.Load()
	if orders == 0 {
		t.Fatal("the CA saw no order")
	}
	second := newReplica(t, p, rdb, nil).serve(t)
	for _, r := range []*replica{first, second} {
		if _, err := r.m.GetCertificate(&tls.ClientHelloInfo{ServerName: hostA}); !errors.Is(err, ErrRecentFailure) {
			t.Errorf("within the backoff: %v, want ErrRecentFailure", err)
		}
	}
	if got := p.Orders.Load(); got != orders {
		t.Errorf("orders during the backoff: %d more", got-orders)
	}
	if v, _ := first.m.locks.holder(context.Background(), hostA); v != resultFailed {
		t.Errorf("lock = %q, want %q for the backoff", v, resultFailed)
	}
}
