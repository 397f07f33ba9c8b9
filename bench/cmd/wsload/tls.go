package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// clientTLS is the TLS configuration of every wss:// and https:// dial:
// the benchmark's CA (-ca), nothing else. nil without -ca.
var clientTLS *tls.Config

// loadCA makes the dials trust the PEM CA in path ("": no TLS).
func loadCA(path string) error {
	if path == "" {
		return nil
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("%s: no certificate", path)
	}
	// X25519 first: what nginx 1.22 with OpenSSL 3.0 offers. Go would
	// otherwise agree X25519MLKEM768 with edge (post-quantum hybrid, more
	// CPU per handshake) and X25519 with nginx: not one cipher for both.
	clientTLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12,
		CurvePreferences: []tls.CurveID{tls.X25519, tls.CurveP256}}
	return nil
}

// httpClient dials with clientTLS. One is shared: allocations reuse its
// keep-alive connections, and upgraded sockets leave its pool.
var httpClient = sync.OnceValue(func() *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS, MaxIdleConnsPerHost: 64}}
})

// tlsNote names the negotiated version and suite of resp's connection, so
// that the output shows edge and nginx agreed on the same cipher.
func tlsNote(resp *http.Response) string {
	if resp == nil || resp.TLS == nil {
		return ""
	}
	return stateNote(*resp.TLS)
}

func stateNote(st tls.ConnectionState) string {
	return tls.VersionName(st.Version) + " " + tls.CipherSuiteName(st.CipherSuite) + " " + st.CurveID.String()
}

// handshakes measures full TLS handshakes (no session resumption: the
// client keeps no session cache) against a TLS listener for a while, with
// a number of concurrent dialers, and reports them per second and per
// CPU-second of the server's pids: handshakes per second per core.
func handshakes(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("handshakes", flag.ExitOnError)
	label := fs.String("label", "", "name of this server in the output")
	addr := fs.String("addr", "127.0.0.1:18082", "TLS listener")
	ca := fs.String("ca", "", "PEM CA the server's certificate is signed by")
	pids := fs.String("pids", "", "comma-separated pids of the server")
	conns := fs.Int("conns", 8, "concurrent dialers")
	measure := fs.Duration("measure", 5*time.Second, "measurement window")
	fs.Parse(args)
	if err := loadCA(*ca); err != nil {
		return err
	}
	if clientTLS == nil {
		return fmt.Errorf("handshakes: -ca is required")
	}
	cfg := clientTLS.Clone()
	cfg.ServerName = "127.0.0.1"
	// The window ends by the clock, not by a context deadline: dials cut
	// short by a deadline would count as failures.
	end := time.Now().Add(*measure)
	var n, failed atomic.Int64
	var suite, firstErr atomic.Value
	var wg sync.WaitGroup
	cpu0, t0 := cpuTicks(*pids), time.Now()
	for range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: cfg}
			for ctx.Err() == nil && time.Now().Before(end) {
				c, err := d.DialContext(ctx, "tcp", *addr)
				if err != nil {
					if ctx.Err() == nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					}
					continue
				}
				st := c.(*tls.Conn).ConnectionState()
				suite.Store(stateNote(st))
				c.Close()
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	cpuSec := float64(cpuTicks(*pids)-cpu0) / 100
	line := map[string]any{
		"mode": *label, "handshakes": n.Load(), "failed": failed.Load(), "window_s": elapsed.Seconds(),
		"handshakes_per_s": float64(n.Load()) / elapsed.Seconds(), "tls": suite.Load(),
	}
	if e := firstErr.Load(); e != nil {
		line["first_error"] = e
	}
	if *pids != "" && cpuSec > 0 {
		line["server_cpu_pct"] = 100 * cpuSec / elapsed.Seconds()
		line["handshakes_per_cpu_s"] = float64(n.Load()) / cpuSec
	}
	return json.NewEncoder(os.Stdout).Encode(line)
}
