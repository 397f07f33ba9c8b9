// Command hookload sends Twilio-style allocation webhooks at a steady rate
// and prints the answer time percentiles, for the webhook path measured
// while edge relays media (bench/media/webhooks.sh). Each webhook is a new
// call (CallSid CA + 32 hex digits, the first two from -run); only 200
// answers count, any other status or error is counted apart.
//
//	hookload -target http://127.0.0.1:18080/api/v1/twilio/allocate?merchant_id=bench -rate 200 -d 15s -run 1
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

func main() {
	target := flag.String("target", "http://127.0.0.1:18080/api/v1/twilio/allocate?merchant_id=bench", "webhook URL")
	rate := flag.Int("rate", 200, "webhooks per second")
	dur := flag.Duration("d", 15*time.Second, "how long to send")
	run := flag.Int("run", 0, "0-255: keeps each run's call ids apart")
	flag.Parse()
	if *rate <= 0 || *run < 0 || *run > 255 {
		fmt.Fprintln(os.Stderr, "hookload: -rate must be positive and -run 0-255")
		os.Exit(2)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 5 * time.Second}
	var (
		mu     sync.Mutex
		took   []time.Duration
		failed int
		wg     sync.WaitGroup
	)
	tick := time.NewTicker(time.Second / time.Duration(*rate))
	defer tick.Stop()
	for i, end := 0, time.Now().Add(*dur); time.Now().Before(end); i++ {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			form := url.Values{"CallSid": {fmt.Sprintf("CA%02x%030x", *run, i)}}
			start := time.Now()
			resp, err := client.Post(*target, "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			d := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || resp.StatusCode != http.StatusOK {
				failed++
				return
			}
			took = append(took, d)
		}()
	}
	wg.Wait()
	if len(took) == 0 {
		fmt.Fprintf(os.Stderr, "hookload: no webhook answered 200 (%d failed)\n", failed)
		os.Exit(1)
	}
	slices.Sort(took)
	pct := func(q float64) int64 { return took[int(q*float64(len(took)-1))].Microseconds() }
	fmt.Printf(`{"answered":%d,"failed":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d}`+"\n",
		len(took), failed, pct(.5), pct(.9), pct(.99), pct(1))
}
