package acme

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"github.com/edge-voice/edge/allocator"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"golang.org/x/crypto/acme/autocert"

	"github.com/edge-voice/edge/internal/testredis"
)

func TestStoreEntries(t *testing.T) {
	rdb := testredis.Start(t).Client()
	ctx := context.Background()
	s := NewStore(rdb, allocator.NewKeys(prefix))
	if _, err := s.Get(ctx, "nothing"); !errors.Is(err, autocert.ErrCacheMiss) {
		t.Fatalf("Get of a missing entry: %v, want autocert.ErrCacheMiss", err)
	}
	for name, wantTTL := range map[string]bool{
		"edge.example.com":       false,
		"acme_account+key":       false,
		"edge.example.com+token": true,
		"abc123+http-01":         true,
	} {
		if err := s.Put(ctx, name, []byte("v-"+name)); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, name)
		if err != nil || string(got) != "v-"+name {
			t.Errorf("Get(%s) = %q, %v", name, got, err)
		}
		key := prefix + "acme:cache:" + name
		ttl := rdb.TTL(ctx, key).Val()
		if wantTTL != (ttl > 0 && ttl <= tokenTTL) {
			t.Errorf("%s: TTL %v, want a TTL: %v", key, ttl, wantTTL)
		}
	}
	if err := s.Delete(ctx, "abc123+http-01"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "abc123+http-01"); !errors.Is(err, autocert.ErrCacheMiss) {
		t.Errorf("after Delete: %v", err)
	}
	if err := s.Delete(ctx, "abc123+http-01"); err != nil {
		t.Errorf("Delete of a missing entry: %v", err)
	}
	rdb.Set(ctx, prefix+"acme:cache:huge", bytes.Repeat([]byte("x"), maxEntryBytes+1), 0)
	if _, err := s.Get(ctx, "huge"); err == nil || errors.Is(err, autocert.ErrCacheMiss) {
		t.Errorf("oversized entry: %v, want an error", err)
	}
}

// TestStoredCertificateUsable: entries that cannot serve host now are
// misses (a new certificate replaces them), never served.
func TestStoredCertificateUsable(t *testing.T) {
	rdb := testredis.Start(t).Client()
	ctx := context.Background()
	s := NewStore(rdb, allocator.NewKeys(prefix))
	now := time.Now()
	good := selfSigned(t, "edge.example.com", now.Add(-time.Hour), now.Add(time.Hour), nil)
	tests := map[string]struct {
		entry []byte
		host  string
		ok    bool
	}{
		"good":          {good, "edge.example.com", true},
		"other host":    {good, "other.example.com", false},
		"expired":       {selfSigned(t, "edge.example.com", now.Add(-2*time.Hour), now.Add(-time.Hour), nil), "edge.example.com", false},
		"not yet valid": {selfSigned(t, "edge.example.com", now.Add(time.Hour), now.Add(2*time.Hour), nil), "edge.example.com", false},
		"key mismatch":  {selfSigned(t, "edge.example.com", now.Add(-time.Hour), now.Add(time.Hour), mustKey(t)), "edge.example.com", false},
		"garbage":       {[]byte("-----BEGIN NOTHING-----"), "edge.example.com", false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			rdb.Set(ctx, prefix+"acme:cache:"+tt.host, tt.entry, 0)
			c, err := s.certificate(ctx, tt.host, now)
			if err != nil {
				t.Fatal(err)
			}
			if (c != nil) != tt.ok {
				t.Errorf("usable = %v, want %v", c != nil, tt.ok)
			}
		})
	}
}

// selfSigned is an entry in autocert's format (key PEM, then certificate)
// for host; with otherKey the stored key is not the certificate's.
func selfSigned(t *testing.T, host string, from, to time.Time, otherKey *ecdsa.PrivateKey) []byte {
	t.Helper()
	key := mustKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host},
		DNSNames: []string{host}, NotBefore: from, NotAfter: to,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if otherKey != nil {
		key = otherKey
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	var b bytes.Buffer
	pem.Encode(&b, &pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	return b.Bytes()
}

func mustKey(t *testing.T) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestGate: the CA transport passes requests only until its deadline or
// close; after that autocert's own timers get errGateClosed.
func TestGate(t *testing.T) {
	var reached int
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached++ }))
	defer srv.Close()
	get := func(g *gate) error {
		res, err := (&http.Client{Transport: g}).Get(srv.URL)
		if err == nil {
			res.Body.Close()
		}
		return err
	}
	open := &gate{base: http.DefaultTransport, until: time.Now().Add(time.Minute)}
	if err := get(open); err != nil {
		t.Fatalf("open gate: %v", err)
	}
	open.close()
	if err := get(open); !errors.Is(err, errGateClosed) {
		t.Errorf("closed gate: %v, want errGateClosed", err)
	}
	if err := get(&gate{base: http.DefaultTransport}); !errors.Is(err, errGateClosed) {
		t.Errorf("never-opened gate (the serving Manager's): %v", err)
	}
	if err := get(&gate{base: http.DefaultTransport, until: time.Now().Add(-time.Second)}); !errors.Is(err, errGateClosed) {
		t.Errorf("gate past its deadline: %v", err)
	}
	if reached != 1 {
		t.Errorf("the server saw %d requests, want 1", reached)
	}
}
