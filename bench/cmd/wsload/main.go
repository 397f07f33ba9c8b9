// Command wsload is the media path's load tool: it opens N Twilio-like
// streams (50 text frames per second each way, ~300-byte JSON with a base64
// audio payload) against echoing fake pods, directly or through a proxy,
// and reports round-trip percentiles and the proxy's CPU per message and
// RSS per stream (read from /proc of the pids given).
//
//	wsload pods -addrs 127.0.0.1:17001,127.0.0.1:17002      run echo pods
//	wsload run -mode edge|nginx|direct -streams 200 ...     one measurement
//	wsload handshakes -addr 127.0.0.1:18082 -ca ca.crt ...    TLS handshakes per core
//
// With -ca, targets are https:// (edge's allocate) and wss:// (the media
// sockets), trusting that CA.
//
// See bench/media/run.sh and docs/bench-media.md.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/internal/fakeagent"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: wsload pods|run [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "pods":
		err = pods(ctx, os.Args[2:])
	case "run":
		err = run(ctx, os.Args[2:])
	case "handshakes":
		err = handshakes(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "wsload:", err)
		os.Exit(1)
	}
}

// pods runs one fake agent (WebSocket echo) per address until killed.
func pods(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("pods", flag.ExitOnError)
	addrs := fs.String("addrs", "127.0.0.1:17001", "comma-separated listen addresses")
	fs.Parse(args)
	var wg sync.WaitGroup
	for _, a := range strings.Split(*addrs, ",") {
		ag, err := fakeagent.Listen(a, nil)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() { defer wg.Done(); ag.Run(ctx) }()
	}
	fmt.Println("pods ready")
	wg.Wait()
	return nil
}

type runFlags struct {
	mode, label, target, pods, pids string
	streams                         int
	warmup, measure                 time.Duration
}

func run(ctx context.Context, args []string) error {
	var f runFlags
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	fs.StringVar(&f.mode, "mode", "edge", "edge (allocate, then open ws_url), nginx (/ws/pod/<pod>/...) or direct (the pod itself)")
	fs.StringVar(&f.label, "label", "", "name of this path in the output (default: the mode)")
	fs.StringVar(&f.target, "target", "http://127.0.0.1:18080", "edge's or nginx's public base URL (unused for direct)")
	fs.StringVar(&f.pods, "pods", "pod-0=127.0.0.1:17001", "comma-separated name=addr of the fake pods")
	fs.StringVar(&f.pids, "pids", "", "comma-separated pids whose CPU and RSS are the proxy's")
	fs.IntVar(&f.streams, "streams", 200, "concurrent streams")
	fs.DurationVar(&f.warmup, "warmup", 5*time.Second, "time after all streams are open before measuring")
	fs.DurationVar(&f.measure, "measure", 15*time.Second, "measurement window")
	ca := fs.String("ca", "", "PEM CA to trust: the target speaks TLS (https://, wss://)")
	fs.Parse(args)
	if err := loadCA(*ca); err != nil {
		return err
	}
	if f.label == "" {
		f.label = f.mode
	}

	pods := strings.Split(f.pods, ",")
	urls := make([]string, f.streams)
	runID := time.Now().UnixNano()
	for i := range urls {
		name, addr, _ := strings.Cut(pods[i%len(pods)], "=")
		const path = "/agent/voice/breeze-buddy/twilio/callback/order-confirmation/v2"
		switch f.mode {
		case "direct":
			urls[i] = "ws://" + addr + path
		case "nginx":
			urls[i] = "ws" + strings.TrimPrefix(f.target, "http") + "/ws/pod/" + name + path
		case "edge":
			u, err := allocate(f.target, fmt.Sprintf("CA-load-%d-%d", runID, i))
			if err != nil {
				return err
			}
			urls[i] = u
		default:
			return fmt.Errorf("unknown mode %q", f.mode)
		}
	}

	// Idle RSS after the allocations: the webhooks are not the media path.
	idleRSS := rssKiB(f.pids)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var measuring atomic.Bool
	var opened sync.WaitGroup
	streams := make([]*stream, f.streams)
	errc := make(chan error, f.streams)
	var done sync.WaitGroup
	for i := range streams {
		s := &stream{}
		streams[i] = s
		opened.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			if err := s.run(ctx, urls[i], &opened, &measuring, time.Duration(i)*20*time.Millisecond/time.Duration(f.streams)); err != nil && ctx.Err() == nil {
				errc <- err
				cancel()
			}
		}()
	}
	opened.Wait()
	select {
	case err := <-errc:
		return err
	case <-time.After(f.warmup):
	}
	cpu0, t0 := cpuTicks(f.pids), time.Now()
	measuring.Store(true)
	select {
	case err := <-errc:
		return err
	case <-time.After(f.measure):
	}
	measuring.Store(false)
	cpu1, elapsed := cpuTicks(f.pids), time.Since(t0)
	loadRSS := rssKiB(f.pids)
	cancel()
	done.Wait()

	var rtts []time.Duration
	var sent int64
	for _, s := range streams {
		rtts = append(rtts, s.rtts...)
		sent += s.sent.Load()
	}
	sort.Slice(rtts, func(i, j int) bool { return rtts[i] < rtts[j] })
	pct := func(p float64) string {
		if len(rtts) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f", float64(rtts[int(p*float64(len(rtts)-1))].Microseconds()))
	}
	// Through a proxy every echo is two forwarded messages (there and back).
	forwarded := 2 * int64(len(rtts))
	cpuSec := float64(cpu1-cpu0) / 100 // USER_HZ
	line := map[string]any{
		"mode": f.label, "streams": f.streams, "window_s": elapsed.Seconds(),
		"sent": sent, "echoed": len(rtts), "msgs_per_s": float64(forwarded) / elapsed.Seconds(),
		"rtt_p50_us": pct(0.50), "rtt_p90_us": pct(0.90), "rtt_p99_us": pct(0.99), "rtt_max_us": pct(1),
	}
	if streams[0].tls != "" {
		line["tls"] = streams[0].tls
	}
	if f.pids != "" {
		line["proxy_cpu_pct"] = 100 * cpuSec / elapsed.Seconds()
		line["proxy_cpu_us_per_msg"] = 1e6 * cpuSec / float64(forwarded)
		line["proxy_rss_idle_kib"] = idleRSS
		line["proxy_rss_load_kib"] = loadRSS
		line["proxy_rss_per_stream_kib"] = float64(loadRSS-idleRSS) / float64(f.streams)
	}
	return json.NewEncoder(os.Stdout).Encode(line)
}

// allocate asks edge's generic endpoint for a pod and returns the ws_url.
func allocate(base, callID string) (string, error) {
	resp, err := httpClient().Post(base+"/api/v1/allocate", "application/json", strings.NewReader(`{"call_sid":"`+callID+`"}`))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var ans struct {
		WSURL string `json:"ws_url"`
		Error string `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&ans)
	if resp.StatusCode != http.StatusOK || ans.WSURL == "" {
		return "", fmt.Errorf("allocate %s: %s %s", callID, resp.Status, ans.Error)
	}
	return ans.WSURL, nil
}

// stream is one Twilio-like media stream.
type stream struct {
	rtts []time.Duration // reader goroutine only, read after it returns
	sent atomic.Int64
	tls  string // negotiated version and suite, "" for plain
}

var epoch = time.Now()

var audio = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xff}, 160)) // 20ms of mu-law

func (s *stream) run(ctx context.Context, url string, opened *sync.WaitGroup, measuring *atomic.Bool, offset time.Duration) error {
	opts := &websocket.DialOptions{CompressionMode: websocket.CompressionDisabled}
	if clientTLS != nil {
		opts.HTTPClient = httpClient()
	}
	c, resp, err := websocket.Dial(ctx, url, opts)
	s.tls = tlsNote(resp)
	opened.Done()
	if err != nil {
		return fmt.Errorf("open %s: %w", url, err)
	}
	defer c.CloseNow()
	go func() {
		// Stagger the streams over one 20ms period, as calls are.
		time.Sleep(offset)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		buf := make([]byte, 0, 400)
		for seq := 1; ; seq++ {
			buf = buf[:0]
			buf = append(buf, `{"event":"media","sequenceNumber":"`...)
			buf = strconv.AppendInt(buf, int64(seq), 10)
			buf = append(buf, `","media":{"track":"inbound","chunk":"1","timestamp":"`...)
			buf = strconv.AppendInt(buf, int64(time.Since(epoch)), 10)
			buf = append(buf, `","payload":"`...)
			buf = append(buf, audio...)
			buf = append(buf, `"},"streamSid":"MZ00000000000000000000000000000000"}`...)
			if err := c.Write(ctx, websocket.MessageText, buf); err != nil {
				return
			}
			if measuring.Load() {
				s.sent.Add(1)
			}
			select {
			case <-ctx.Done():
				c.Close(websocket.StatusNormalClosure, "")
				return
			case <-tick.C:
			}
		}
	}()
	key := []byte(`"timestamp":"`)
	for {
		_, msg, err := c.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		now := time.Since(epoch)
		i := bytes.Index(msg, key)
		if i < 0 {
			continue
		}
		rest := msg[i+len(key):]
		j := bytes.IndexByte(rest, '"')
		sentAt, err := strconv.ParseInt(string(rest[:j]), 10, 64)
		if err == nil && measuring.Load() {
			s.rtts = append(s.rtts, now-time.Duration(sentAt))
		}
	}
}
