package providers_test

import (
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edge-voice/edge/plugins"
)

var (
	benchRate     = flag.Int("webhook-rate", 200, "webhooks per second on each path (BenchmarkWebhookVsGeneric)")
	benchDuration = flag.Duration("webhook-duration", 10*time.Second, "how long BenchmarkWebhookVsGeneric sends")
	// The remedies tried for the p99 tail (docs/bench-plugins.md).
	benchPluginEnv  = flag.String("webhook-plugin-env", "", "extra environment of the plugin process, comma separated (e.g. GOMAXPROCS=1)")
	benchPluginNice = flag.Int("webhook-plugin-nice", 0, "run the plugin process under nice -n N (negative: before other work; needs root)")
)

// BenchmarkWebhookVsGeneric measures, side by side in one run, the latency
// of a signed Twilio webhook through the twilio plugin process and of the
// generic JSON /api/v1/allocate, each at a steady -webhook-rate per second
// (open loop: requests are sent on schedule, not after the previous
// answer, so queueing shows). Both allocate a new call on a real Redis.
//
//	go test -run '^$' -bench WebhookVsGeneric -benchtime 1x ./providers/
func BenchmarkWebhookVsGeneric(b *testing.B) {
	s := spec("twilio", plugins.Settings{"auth_tokens": twilioToken})
	if *benchPluginEnv != "" || *benchPluginNice != 0 {
		command := s.Command
		s.Command = func() *exec.Cmd {
			cmd := command()
			if *benchPluginEnv != "" {
				cmd.Env = append(cmd.Env, strings.Split(*benchPluginEnv, ",")...)
			}
			if *benchPluginNice != 0 {
				cmd.Args = append([]string{"nice", "-n", strconv.Itoa(*benchPluginNice)}, cmd.Args...)
				cmd.Path, _ = exec.LookPath("nice")
			}
			return cmd
		}
	}
	e := newEnv(b, s)
	for i := range 8 {
		e.register(b, "basic", fmt.Sprintf("shared-%d", i))
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	send := func(path, ctype, body string, header ...string) (time.Duration, error) {
		req, _ := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("%s: status %d", path, resp.StatusCode)
		}
		return time.Since(start), nil
	}
	generic := func(i int) (time.Duration, error) {
		return send("/api/v1/allocate", "application/json", fmt.Sprintf(`{"call_sid":"g-%d","merchant_id":"acme"}`, i))
	}
	twilio := func(i int) (time.Duration, error) {
		form := url.Values{"CallSid": {fmt.Sprintf("CA%032x", uint64(i))}, "From": {"+15550100"}, "To": {"+15550199"}, "AccountSid": {"AC1"}}
		return send(twilioPath, "application/x-www-form-urlencoded", form.Encode(),
			"X-Twilio-Signature", twilioSign("https://edge.example.com"+twilioPath, form))
	}
	// Warm up both paths (connections, script cache).
	for i := range 50 {
		generic(-1 - i)
		twilio(-1 - i)
	}
	b.ResetTimer()
	for n := range b.N {
		var mu sync.Mutex
		lat := map[string][]time.Duration{}
		var wg sync.WaitGroup
		var failed error
		period := time.Second / time.Duration(2**benchRate)
		tick := time.NewTicker(period)
		total := int(benchDuration.Seconds() * float64(2**benchRate))
		for i := range total {
			<-tick.C
			name, f := "generic", generic
			if i%2 == 1 {
				name, f = "twilio", twilio
			}
			wg.Go(func() {
				d, err := f(n*total + i)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = err
					return
				}
				lat[name] = append(lat[name], d)
			})
		}
		tick.Stop()
		wg.Wait()
		if failed != nil {
			b.Fatal(failed)
		}
		g50, g99 := percentiles(lat["generic"])
		t50, t99 := percentiles(lat["twilio"])
		b.ReportMetric(ms(g50), "generic-p50-ms")
		b.ReportMetric(ms(g99), "generic-p99-ms")
		b.ReportMetric(ms(t50), "twilio-p50-ms")
		b.ReportMetric(ms(t99), "twilio-p99-ms")
		b.ReportMetric(ms(t50-g50), "added-p50-ms")
		b.Logf("%d requests per path at %d/s each: generic p50 %v p99 %v; twilio plugin p50 %v p99 %v",
			len(lat["generic"]), *benchRate, g50, g99, t50, t99)
	}
}

func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	return d[len(d)*50/100], d[len(d)*99/100]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
