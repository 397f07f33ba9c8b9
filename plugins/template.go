package plugins

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
)

// Template is a success answer with slots that edge fills with the
// allocation's values. It exists for speed: a webhook then costs one RPC
// instead of two (the webhook latency budget), while the plugin still owns the
// markup. Each slot carries the escaping of the markup around it, so edge
// never pastes a raw value.
type Template struct {
	Status      int
	ContentType string
	Parts       []Part
}

// Part is literal bytes (Slot == SlotLiteral) or a slot.
type Part struct {
	Literal []byte
	Slot    Slot
	Escape  Escape
}

// Slot names an allocation value.
type Slot int

// Slots.
const (
	SlotLiteral Slot = iota
	SlotWSURL
	SlotPodName
	SlotCallID
	SlotSourcePool
)

// Escape is how a slot's value is escaped.
type Escape int

// Escapes.
const (
	EscapeUnspecified Escape = iota
	EscapeXML                // XML text or attribute value
	EscapeJSON               // inside a JSON string
)

// ErrBadTemplate is returned for a template edge cannot render safely.
var ErrBadTemplate = errors.New("bad answer template")

// Render fills t with a's values.
func (t *Template) Render(a Allocation) (*Response, error) {
	var b bytes.Buffer
	for _, p := range t.Parts {
		if p.Slot == SlotLiteral {
			b.Write(p.Literal)
			continue
		}
		var v string
		switch p.Slot {
		case SlotWSURL:
			v = a.WSURL
		case SlotPodName:
			v = a.PodName
		case SlotCallID:
			v = a.CallID
		case SlotSourcePool:
			v = a.SourcePool
		default:
			return nil, fmt.Errorf("%w: unknown slot %d", ErrBadTemplate, p.Slot)
		}
		switch p.Escape {
		case EscapeXML:
			if err := xml.EscapeText(&b, []byte(v)); err != nil {
				return nil, err
			}
		case EscapeJSON:
			q, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			b.Write(q[1 : len(q)-1]) // the string's inside, quotes dropped
		default:
			return nil, fmt.Errorf("%w: slot %d has no escaping", ErrBadTemplate, p.Slot)
		}
	}
	return &Response{Status: t.Status, ContentType: t.ContentType, Body: b.Bytes()}, nil
}

// NewTemplate derives a Template from a provider's own success rendering:
// render is called once with marker values (letters and digits only, so
// every encoder leaves them as they are), and the body is cut at the markers.
// escape must be the escaping render's encoder applies to those values
// (EscapeXML for encoding/xml, EscapeJSON for encoding/json). The
// conformance suite checks that the template renders exactly what render
// does for real values.
func NewTemplate(escape Escape, render func(Allocation) (*Response, error)) (*Template, error) {
	var nonce [8]byte
	rand.Read(nonce[:])
	tag := "edgeslot" + hex.EncodeToString(nonce[:])
	markers := map[string]Slot{
		tag + "ws": SlotWSURL, tag + "pod": SlotPodName, tag + "call": SlotCallID, tag + "pool": SlotSourcePool,
	}
	resp, err := render(Allocation{CallID: tag + "call", PodName: tag + "pod", WSURL: tag + "ws", SourcePool: tag + "pool"})
	if err != nil {
		return nil, err
	}
	t := &Template{Status: resp.Status, ContentType: resp.ContentType}
	body := resp.Body
	for {
		i := bytes.Index(body, []byte(tag))
		if i < 0 {
			break
		}
		var slot Slot
		var marker string
		for m, s := range markers {
			// The longest marker that matches: "pool" and "pod" share a prefix.
			if bytes.HasPrefix(body[i:], []byte(m)) && len(m) > len(marker) {
				slot, marker = s, m
			}
		}
		if marker == "" {
			return nil, fmt.Errorf("%w: a value was changed by the encoder", ErrBadTemplate)
		}
		if i > 0 {
			t.Parts = append(t.Parts, Part{Literal: bytes.Clone(body[:i])})
		}
		t.Parts = append(t.Parts, Part{Slot: slot, Escape: escape})
		body = body[i+len(marker):]
	}
	if len(body) > 0 {
		t.Parts = append(t.Parts, Part{Literal: bytes.Clone(body)})
	}
	if len(resp.Header) > 0 {
		// Templates carry no headers; such answers go through Answer.
		return nil, fmt.Errorf("%w: answers with extra headers cannot be templated", ErrBadTemplate)
	}
	return t, nil
}
