package wsproto

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrIncomplete: the bytes end before the messages asked for do.
var ErrIncomplete = errors.New("fewer whole messages than asked for")

// Message is one data message: its opcode (OpText or OpBinary) and its
// payload, unmasked and its fragments joined.
type Message struct {
	Opcode  byte
	Payload []byte
}

// Data opcodes (RFC 6455 5.2).
const (
	OpContinuation byte = 0x0
	OpText         byte = 0x1
	OpBinary       byte = 0x2
)

// FirstMessages reads the first n data messages of b, a stream's bytes from
// its first frame on; control frames between them are skipped. It is for
// bytes a relay kept of a stream's opening (a call's first messages,
// replayed to the pod that takes the call over), never a hot path: it
// copies every payload. ErrIncomplete when b holds fewer than n whole
// messages; an error for frames that break the protocol.
func FirstMessages(b []byte, n int) ([]Message, error) {
	var out []Message
	var cur *Message
	for len(out) < n {
		if len(b) < 2 {
			return out, ErrIncomplete
		}
		fin, opcode := b[0]&0x80 != 0, b[0]&0x0f
		hl := headerLen(b[1])
		if len(b) < hl {
			return out, ErrIncomplete
		}
		length := uint64(b[1] & 0x7f)
		off := 2
		switch length {
		case 126:
			length, off = uint64(binary.BigEndian.Uint16(b[2:4])), 4
		case 127:
			length, off = binary.BigEndian.Uint64(b[2:10]), 10
		}
		if length > uint64(len(b)-hl) {
			return out, ErrIncomplete
		}
		payload := append([]byte(nil), b[hl:hl+int(length)]...)
		if b[1]&0x80 != 0 {
			mask := b[off : off+4]
			for i := range payload {
				payload[i] ^= mask[i%4]
			}
		}
		b = b[hl+int(length):]
		switch {
		case opcode >= 0x8:
			continue // ping, pong, close: not a message
		case opcode == OpContinuation && cur == nil, opcode != OpContinuation && cur != nil, opcode > OpBinary:
			return out, fmt.Errorf("frame with opcode %#x out of order", opcode)
		case opcode != OpContinuation:
			cur = &Message{Opcode: opcode}
		}
		cur.Payload = append(cur.Payload, payload...)
		if fin {
			out = append(out, *cur)
			cur = nil
		}
	}
	return out, nil
}
