package calls

import (
	"context"
	"sync"
)

// RequestNote is what the call lifecycle learned while serving one HTTP
// request: the call it was about. A listener makes one per request
// (WithRequestNote) and reads it for the request's access log line once
// the handler returned; Service fills it in whichever face called.
type RequestNote struct {
	mu     sync.Mutex
	callID string
}

type noteKey struct{}

// WithRequestNote returns ctx carrying a fresh note.
func WithRequestNote(ctx context.Context) (context.Context, *RequestNote) {
	n := &RequestNote{}
	return context.WithValue(ctx, noteKey{}, n), n
}

// CallID is the call the request was about; "" when none.
func (n *RequestNote) CallID() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.callID
}

// NoteCallID records the call ctx's request is about, when ctx carries a
// note; otherwise it does nothing.
func NoteCallID(ctx context.Context, id string) {
	if n, ok := ctx.Value(noteKey{}).(*RequestNote); ok && id != "" {
		n.mu.Lock()
		n.callID = id
		n.mu.Unlock()
	}
}
