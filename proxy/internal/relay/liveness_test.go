package relay

import (
	"bytes"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

// A pod is pinged once it has been quiet for the interval, one ping at a
// time; any byte from it answers; a ping unanswered for the silence bound
// is a hung pod.
func TestLivenessCheck(t *testing.T) {
	const ms = int64(time.Millisecond)
	var lv Liveness
	lv.init(100*ms, 300*ms, 0)
	steps := []struct {
		at         int64
		heard      bool // the pod sent something at this time
		pinged     bool // edge's ping went out at this time
		ping, hung bool
	}{
		{at: 50 * ms},
		{at: 100 * ms, ping: true},
		{at: 150 * ms}, // asked for, not yet sent: not asked again
		{at: 160 * ms, pinged: true},
		{at: 250 * ms}, // unanswered, silent for less than the bound
		{at: 260 * ms, heard: true},
		{at: 300 * ms},
		{at: 360 * ms, ping: true},
		{at: 370 * ms, pinged: true},
		{at: 559 * ms}, // silent 299 ms since it was heard
		{at: 560 * ms, hung: true},
	}
	for _, s := range steps {
		if s.heard {
			lv.Heard(s.at)
		}
		if s.pinged {
			lv.Pinged(s.at)
		}
		ping, hung, _ := lv.Check(s.at)
		if ping != s.ping || hung != s.hung {
			t.Fatalf("at %v: ping %v, hung %v; want %v, %v", time.Duration(s.at), ping, hung, s.ping, s.hung)
		}
	}
	var off Liveness
	if ping, hung, _ := off.Check(time.Hour.Nanoseconds()); ping || hung || off.On() {
		t.Error("a socket without pings pinged or hung")
	}
}

// The pod's answers to edge's pings are cut out of what goes to the
// client, wherever they fall between the pod's frames; a pong of another
// payload (the client's own ping's), and one split across two reads, pass.
func TestPongsToEdgesPingsStayAtEdge(t *testing.T) {
	var p Policy
	c := func(name string) prometheus.Counter { return prometheus.NewCounter(prometheus.CounterOpts{Name: name}) }
	p.Init(Limits{PodPingInterval: time.Second, PodSilence: 3 * time.Second}, &[2]Counters{
		{Bytes: c("in_bytes"), Messages: c("in_messages")},
		{Bytes: c("out_bytes"), Messages: c("out_messages")},
	}, 0, false)
	s := &Socket{}
	edgePong := wsproto.Frame(true, 0xa, []byte(wsproto.PingPayload), nil)
	otherPong := wsproto.Frame(true, 0xa, []byte("client"), nil)
	msg := func(text string) []byte { return wsproto.Frame(true, 1, []byte(text), nil) }
	fragment := wsproto.Frame(false, 1, []byte("frag-"), nil)
	last := wsproto.Frame(true, 0, []byte("ment"), nil)
	read := bytes.Join([][]byte{edgePong, msg("one"), edgePong, edgePong, fragment, edgePong, last, otherPong, edgePong}, nil)
	want := bytes.Join([][]byte{msg("one"), fragment, last, otherPong}, nil)
	b := bytes.Clone(read)
	n, v := p.Dirs[1].Relayed(s, b)
	if v.Code != 0 || !bytes.Equal(b[:n], want) {
		t.Fatalf("forwarded %q (%v), want %q", b[:n], v, want)
	}
	// Split across two reads, it is the pod's to send: it passes.
	split := bytes.Clone(edgePong)
	n1, _ := p.Dirs[1].Relayed(s, split[:3])
	n2, _ := p.Dirs[1].Relayed(s, split[3:])
	if n1 != 3 || n2 != len(edgePong)-3 {
		t.Errorf("a split pong: %d then %d bytes forwarded, want all of it", n1, n2)
	}
	if got := p.Dirs[1].sc.Messages; got != 2 {
		t.Errorf("messages counted %d, want 2", got)
	}
	// From the client edge's pongs are not looked for: a client's pong
	// to a pod's ping passes whatever its payload.
	clientPong := wsproto.Frame(true, 0xa, []byte(wsproto.PingPayload), &[4]byte{1, 2, 3, 4})
	if n, _ := p.Dirs[0].Relayed(s, bytes.Clone(clientPong)); n != len(clientPong) {
		t.Errorf("the client's pong: %d of %d bytes forwarded", n, len(clientPong))
	}
}
