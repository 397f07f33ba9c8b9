package plivo

import (
	"fmt"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestNonceSetWindow(t *testing.T) {
	c := &fakeClock{time.Unix(1e9, 0)}
	s := newNonceSet(time.Minute, 10, c.now)
	if !s.firstUse("a") || s.firstUse("a") {
		t.Fatal("a nonce was not refused the second time")
	}
	c.t = c.t.Add(59 * time.Second)
	if s.firstUse("a") {
		t.Fatal("refused only for less than the window")
	}
	c.t = c.t.Add(time.Second)
	if !s.firstUse("a") {
		t.Fatal("a nonce is still refused after the window")
	}
	if s.len() != 1 {
		t.Errorf("%d nonces remembered, want 1", s.len())
	}
}

func TestNonceSetCap(t *testing.T) {
	c := &fakeClock{time.Unix(1e9, 0)}
	s := newNonceSet(time.Hour, 100, c.now)
	for i := range 1000 {
		c.t = c.t.Add(time.Millisecond)
		if !s.firstUse(fmt.Sprint(i)) {
			t.Fatalf("nonce %d refused on first use", i)
		}
		if s.len() > 100 {
			t.Fatalf("%d nonces remembered, cap 100", s.len())
		}
	}
	if s.firstUse("999") || s.firstUse("900") {
		t.Error("a recent nonce was forgotten")
	}
	if !s.firstUse("0") {
		t.Error("the oldest nonce was not evicted at the cap")
	}
	if len(s.order)-s.head != s.len() || cap(s.order) > 400 {
		t.Errorf("FIFO holds %d live of %d (cap %d) for %d nonces", len(s.order)-s.head, len(s.order), cap(s.order), s.len())
	}
}
