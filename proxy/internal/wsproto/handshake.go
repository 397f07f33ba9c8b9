package wsproto

import (
	"bufio"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// guid is RFC 6455's fixed GUID for Sec-WebSocket-Accept.
const guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// ErrNotUpgrade is a request that is not a WebSocket opening handshake.
var ErrNotUpgrade = errors.New("not a websocket upgrade")

// Ways a server refuses the upgrade (ClientHandshake).
var (
	ErrUpgradeStatus = errors.New("pod answered the upgrade with a status other than 101")
	ErrBadUpgrade    = errors.New("pod's 101 is not a valid WebSocket handshake")
)

// StatusError is a server's answer to the upgrade other than 101; it
// matches ErrUpgradeStatus.
type StatusError struct {
	Code   int
	Status string // the status line's text, "400 Bad Request"
}

func (e *StatusError) Error() string { return ErrUpgradeStatus.Error() + ": " + e.Status }

// Unwrap makes a StatusError match ErrUpgradeStatus.
func (e *StatusError) Unwrap() error { return ErrUpgradeStatus }

// CheckUpgrade validates a client's opening handshake (RFC 6455 4.2.1).
func CheckUpgrade(r *http.Request) error {
	switch {
	case r.Method != http.MethodGet:
		return fmt.Errorf("%w: method %s", ErrNotUpgrade, r.Method)
	case !HasToken(r.Header, "Connection", "upgrade"):
		return fmt.Errorf("%w: no Connection: upgrade", ErrNotUpgrade)
	case !HasToken(r.Header, "Upgrade", "websocket"):
		return fmt.Errorf("%w: no Upgrade: websocket", ErrNotUpgrade)
	case r.Header.Get("Sec-WebSocket-Version") != "13":
		return fmt.Errorf("%w: Sec-WebSocket-Version must be 13", ErrNotUpgrade)
	case len(r.Header.Get("Sec-WebSocket-Key")) != 24:
		return fmt.Errorf("%w: bad Sec-WebSocket-Key", ErrNotUpgrade)
	}
	return nil
}

// HasToken reports whether a comma-separated header name lists token
// (case-insensitive).
func HasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// AcceptKey is the Sec-WebSocket-Accept answering key.
func AcceptKey(key string) string {
	sum := sha1.Sum([]byte(key + guid))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// NewKey is a fresh Sec-WebSocket-Key, for a handshake edge starts itself.
func NewKey() string {
	var key [16]byte
	rand.Read(key[:])
	return base64.StdEncoding.EncodeToString(key[:])
}

// ClientHandshake opens a WebSocket on rw as its client: a GET of uri on
// host with key and the caller's headers h (Host, the upgrade pair,
// Sec-WebSocket-Key and -Version are written here; h must not hold them), then the
// server's answer, which must be a valid 101 for key. early holds the bytes
// the server sent after its 101 that the response reader buffered: they
// are the first of the stream. Header values lose any CR and LF, so no
// value can split the request.
func ClientHandshake(rw io.ReadWriter, host, uri, key string, h http.Header) (resp *http.Response, early []byte, err error) {
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n", uri, host)
	b.WriteString("Sec-WebSocket-Key: " + HeaderValue(key) + "\r\nSec-WebSocket-Version: 13\r\n")
	writeHeader(&b, h)
	b.WriteString("\r\n")
	if _, err := io.WriteString(rw, b.String()); err != nil {
		return nil, nil, err
	}
	br := bufio.NewReaderSize(rw, 1024)
	resp, err = http.ReadResponse(br, &http.Request{Method: http.MethodGet})
	if err != nil {
		return nil, nil, err
	}
	resp.Body.Close()
	switch proto := resp.Header.Get("Sec-WebSocket-Protocol"); {
	case resp.StatusCode != http.StatusSwitchingProtocols:
		return nil, nil, &StatusError{Code: resp.StatusCode, Status: resp.Status}
	case !HasToken(resp.Header, "Upgrade", "websocket") || !HasToken(resp.Header, "Connection", "upgrade"):
		return nil, nil, fmt.Errorf("%w: no upgrade headers", ErrBadUpgrade)
	case resp.Header.Get("Sec-WebSocket-Accept") != AcceptKey(key):
		return nil, nil, fmt.Errorf("%w: wrong Sec-WebSocket-Accept", ErrBadUpgrade)
	// RFC 6455 4.1: a client fails a 101 that chooses an extension or a
	// subprotocol it never offered.
	case resp.Header.Get("Sec-WebSocket-Extensions") != "" && h.Get("Sec-WebSocket-Extensions") == "":
		return nil, nil, fmt.Errorf("%w: an extension that was not offered", ErrBadUpgrade)
	case proto != "" && !HasToken(h, "Sec-WebSocket-Protocol", proto):
		return nil, nil, fmt.Errorf("%w: subprotocol %q was not offered", ErrBadUpgrade, HeaderValue(proto))
	}
	if n := br.Buffered(); n > 0 {
		early, _ = br.Peek(n)
		early = append([]byte(nil), early...)
	}
	return resp, early, nil
}

// WriteSwitching writes a server's 101 to w as resp has it: status line
// and resp's headers (Sec-WebSocket-Accept, -Protocol, -Extensions...).
func WriteSwitching(w *bufio.Writer, resp *http.Response) error {
	w.WriteString("HTTP/1.1 101 Switching Protocols\r\n")
	var b strings.Builder
	writeHeader(&b, resp.Header)
	w.WriteString(b.String())
	w.WriteString("\r\n")
	return w.Flush()
}

func writeHeader(b *strings.Builder, h http.Header) {
	for name, vs := range h {
		for _, v := range vs {
			b.WriteString(name + ": " + HeaderValue(v) + "\r\n")
		}
	}
}

// HeaderValue drops CR and LF, which net/http already refuses in incoming
// headers; this keeps a header from ever splitting the request edge writes.
func HeaderValue(v string) string {
	if !strings.ContainsAny(v, "\r\n") {
		return v
	}
	return strings.NewReplacer("\r", "", "\n", "").Replace(v)
}
