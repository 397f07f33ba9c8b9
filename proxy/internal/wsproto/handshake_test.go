package wsproto

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// conn is a connection's two halves: what the client writes, and the
// server's canned answer.
type conn struct {
	sent   bytes.Buffer
	answer io.Reader
}

func (c *conn) Read(b []byte) (int, error)  { return c.answer.Read(b) }
func (c *conn) Write(b []byte) (int, error) { return c.sent.Write(b) }

func TestClientHandshake(t *testing.T) {
	key := NewKey()
	ok := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + AcceptKey(key) + "\r\n\r\n"
	for name, tc := range map[string]struct {
		answer, early string
		err           error
	}{
		"101":               {answer: ok},
		"101, then a frame": {answer: ok + "\x81\x02hi", early: "\x81\x02hi"},
		"500":               {answer: "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n", err: ErrUpgradeStatus},
		"wrong accept":      {answer: strings.Replace(ok, AcceptKey(key), AcceptKey(NewKey()), 1), err: ErrBadUpgrade},
		"no upgrade":        {answer: strings.Replace(ok, "Upgrade: websocket\r\n", "", 1), err: ErrBadUpgrade},
	} {
		c := &conn{answer: strings.NewReader(tc.answer)}
		h := http.Header{"User-Agent": {"probe"}, "X-Evil": {"a\r\nInjected: yes"}}
		resp, early, err := ClientHandshake(c, "10.0.0.1:8000", "/agent?x=1", key, h)
		if !errors.Is(err, tc.err) || (err == nil) != (resp != nil) || string(early) != tc.early {
			t.Errorf("%s: resp %v early %q err %v; want early %q err %v", name, resp != nil, early, err, tc.early, tc.err)
		}
		req := c.sent.String()
		for _, want := range []string{"GET /agent?x=1 HTTP/1.1\r\n", "Host: 10.0.0.1:8000\r\n", "Sec-WebSocket-Key: " + key + "\r\n",
			"Sec-WebSocket-Version: 13\r\n", "User-Agent: probe\r\n", "X-Evil: aInjected: yes\r\n"} {
			if !strings.Contains(req, want) {
				t.Errorf("%s: request lacks %q:\n%s", name, want, req)
			}
		}
		if strings.Contains(req, "\r\nInjected:") {
			t.Errorf("%s: a header value split the request:\n%s", name, req)
		}
	}
}

func TestCheckUpgrade(t *testing.T) {
	good := func() *http.Request {
		return &http.Request{Method: http.MethodGet, Header: http.Header{
			"Connection": {"keep-alive, Upgrade"}, "Upgrade": {"websocket"},
			"Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {NewKey()},
		}}
	}
	if err := CheckUpgrade(good()); err != nil {
		t.Fatalf("a valid upgrade: %v", err)
	}
	for name, spoil := range map[string]func(r *http.Request){
		"POST":          func(r *http.Request) { r.Method = http.MethodPost },
		"no Connection": func(r *http.Request) { r.Header.Del("Connection") },
		"no Upgrade":    func(r *http.Request) { r.Header.Set("Upgrade", "h2c") },
		"version 8":     func(r *http.Request) { r.Header.Set("Sec-Websocket-Version", "8") },
		"short key":     func(r *http.Request) { r.Header.Set("Sec-Websocket-Key", "abc") },
	} {
		r := good()
		spoil(r)
		if err := CheckUpgrade(r); !errors.Is(err, ErrNotUpgrade) {
			t.Errorf("%s: %v, want ErrNotUpgrade", name, err)
		}
	}
}
