package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/testwait"
	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

// Every TLS 1.3 suite the loops implement, against another implementation:
// OpenSSL's s_client, which (unlike crypto/tls, whose TLS 1.3 suites are
// not configurable) can be made to offer one suite only, and which sends a
// KeyUpdate on its "K" (update_requested) and "k" commands. Each suite
// relays echoes, a message of several records, both KeyUpdates (edge's
// answer read by OpenSSL is the check), and a close both ways. openssl is
// installed by `make deps` with the other test tools.
func TestTLSSuitesAgainstOpenSSL(t *testing.T) {
	eachLoop(t, func(t *testing.T, relay Relay) {
		if _, err := exec.LookPath("openssl"); err != nil {
			t.Fatal("openssl not installed (make deps installs it)")
		}
		for _, suite := range []string{"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"} {
			t.Run(suite, func(t *testing.T) {
				e := newEnv(t, envOpt{relay: relay})
				f := e.serveTLS(t)
				caFile := filepath.Join(t.TempDir(), "ca.pem")
				if err := os.WriteFile(caFile, f.caPEM, 0o600); err != nil {
					t.Fatal(err)
				}
				_, url := e.allocate("CA-ossl", "")
				u := f.wss(e, url)
				path := u[strings.Index(u[len("wss://"):], "/")+len("wss://"):]

				cmd := exec.Command("openssl", "s_client", "-connect", f.addr, "-tls1_3", "-ciphersuites", suite,
					"-CAfile", caFile, "-verify_ip", "127.0.0.1", "-verify_return_error", "-quiet", "-no_ign_eof")
				stdin, _ := cmd.StdinPipe()
				stdout, _ := cmd.StdoutPipe()
				stderr := &lockedBuffer{}
				cmd.Stderr = stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
				timer := time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() })
				defer timer.Stop()
				out := bufio.NewReader(stdout)

				fmt.Fprintf(stdin, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", path, f.addr)
				status, err := out.ReadString('\n')
				if err != nil || !strings.Contains(status, " 101 ") {
					t.Fatalf("upgrade: %q %v; openssl: %s", status, err, stderr.String())
				}
				for {
					line, err := out.ReadString('\n')
					if err != nil {
						t.Fatal(err)
					}
					if line == "\r\n" {
						break
					}
				}
				// Payloads of hex digits with a zero mask: a read of
				// s_client's stdin that starts inside a frame must not start
				// with one of its command letters.
				zero := &[4]byte{}
				echoFrame := func(payload string) {
					t.Helper()
					stdin.Write(frame(true, 2, []byte(payload), zero))
					want := frame(true, 2, []byte(payload), nil)
					got := make([]byte, len(want))
					if _, err := io.ReadFull(out, got); err != nil || !bytes.Equal(got, want) {
						t.Fatalf("echo of %d bytes: %v (openssl: %s)", len(payload), err, stderr.String())
					}
				}
				echoFrame("0123456789abcdef")
				if got := e.relayedSockets("", "tls"); got != 1 {
					t.Fatalf("TLS sockets on the loops = %d, want 1", got)
				}
				echoFrame(strings.Repeat("0123456789abcdef", 40<<10/16))
				for _, cmdLetter := range []string{"K", "k", "K"} {
					before := strings.Count(stderr.String(), "KEYUPDATE")
					io.WriteString(stdin, cmdLetter+"\n")
					testwait.Until(t, 10*time.Second, "openssl's KeyUpdate", func() bool { return strings.Count(stderr.String(), "KEYUPDATE") > before })
					echoFrame(strings.Repeat("abcdef", 100))
				}
				stdin.Write(wsproto.CloseFrame(1000, "", zero))
				want := wsproto.CloseFrame(1000, "", nil)
				got := make([]byte, len(want))
				if _, err := io.ReadFull(out, got); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("close: % x, %v", got, err)
				}
				e.waitSockets(0)
			})
		}
	})
}

// lockedBuffer is a process's stderr read while it is written.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
