package main

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testredis"
	"github.com/edge-voice/edge/internal/testwait"
)

// The status page at the admin listener's root, loaded in a real headless
// Chromium (Debian's chromium, which `make deps` installs: missing, the
// test fails): the DOM shows the pods with their states, the live call and
// the leader; the screenshot is a real rendering of the laptop-sized
// window asked for, with dark text and the state badges' colours (so the
// inline style sheet got past the page's Content-Security-Policy). Without
// the token the page answers 401 with a Basic challenge, and the token
// never reaches edge's log.
func TestStatusPageInHeadlessChromium(t *testing.T) {
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not found (make deps installs Debian's chromium package): %v", err)
	}
	rs := testredis.Start(t)
	const token = "page-token-0123456789abcdef"
	cfg := filepath.Join(t.TempDir(), "edge.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
redis: {url: %q}
admin_token: %s
generic_api: {open: loopback}
leader: {identity: edge-page-1}
pods:
  static:
    - {name: pod-a, address: "127.0.0.1:9", tier: standard}
    - {name: pod-b, address: "127.0.0.1:9", tier: standard}
    - {name: pod-c, address: "127.0.0.1:9", tier: basic}
`, rs.URL(), token)), 0o600)
	edge := edgetest.Start(t, []string{"--config", cfg})
	admin := func(args ...string) string {
		var out bytes.Buffer
		if err := run(context.Background(), append([]string{"admin", "--url", edge.AdminURL, "--token", token}, args...), nil, &out, io.Discard); err != nil {
			t.Fatalf("edge admin %v: %v", args, err)
		}
		return out.String()
	}
	testwait.Until(t, 20*time.Second, "the pods registered", func() bool { return strings.Count(admin("pods"), "\npod-") == 3 })
	resp, err := http.Post(edge.PublicURL+"/api/v1/allocate", "application/json", strings.NewReader(`{"call_sid":"CApage0001","merchant_id":"m-page"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("allocate: %d", resp.StatusCode)
	}
	// pod-a or pod-b holds the call: drain the other one.
	drained := "pod-b"
	if strings.Contains(admin("calls", "pod-b"), "CApage0001") {
		drained = "pod-a"
	}
	admin("drain", drained)

	// No token: 401 and a Basic challenge, the browser's prompt.
	resp, err = http.Get(edge.AdminURL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
		t.Fatalf("page without the token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}

	// The browser sends the URL's credentials as HTTP Basic: the user
	// name is anything, the password the token.
	u, _ := url.Parse(edge.AdminURL + "/")
	u.User = url.UserPassword("operator", token)
	dir := t.TempDir()
	chrome := func(args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
			"--user-data-dir=" + filepath.Join(dir, "profile"), "--window-size=1280,900"}
		cmd := exec.CommandContext(ctx, browser, append(append(base, args...), u.String())...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
		}
		return out
	}
	dom := string(chrome("--dump-dom"))
	for _, want := range []string{
		`<b id="leader">edge-page-1</b> (this replica)`, "CApage0001", "m-page",
		`<td class="id">` + drained + `</td><td>standard</td><td><span class="state draining">draining</span>`,
		`<td class="id">pod-c</td><td>basic</td><td><span class="state available">available</span>`,
		`<span class="state allocated">allocated</span>`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered DOM has no %s:\n%s", want, dom)
		}
	}

	shot := filepath.Join(dir, "page.png")
	chrome("--screenshot=" + shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	checkRendering(t, img)

	if strings.Contains(edge.Log(), token) {
		t.Error("the admin token is in edge's log")
	}
}

// checkRendering checks a screenshot of the page: the window's size, many
// colours (not a blank or an error page), dark text over the tables, and
// the green, blue and amber of the available, allocated and draining
// badges.
func checkRendering(t *testing.T, img image.Image) {
	t.Helper()
	b := img.Bounds()
	if b.Dx() != 1280 || b.Dy() != 900 {
		t.Fatalf("screenshot is %dx%d, want 1280x900", b.Dx(), b.Dy())
	}
	colours := map[[3]uint8]int{}
	dark := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			c := [3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8)}
			colours[c]++
			if int(c[0])+int(c[1])+int(c[2]) < 3*90 {
				dark++
			}
		}
	}
	if len(colours) < 50 {
		t.Errorf("screenshot has %d colours: blank or not the page", len(colours))
	}
	if dark < 2000 {
		t.Errorf("screenshot has %d dark pixels: no text", dark)
	}
	near := func(want [3]uint8) int {
		n := 0
		for c, k := range colours {
			if absDiff(c[0], want[0])+absDiff(c[1], want[1])+absDiff(c[2], want[2]) <= 12 {
				n += k
			}
		}
		return n
	}
	for name, c := range map[string][3]uint8{"available": {0x1a, 0x7f, 0x37}, "allocated": {0x09, 0x69, 0xda}, "draining": {0x9a, 0x67, 0x00}} {
		if n := near(c); n < 200 {
			t.Errorf("%d pixels of the %s badge's colour: the style sheet did not apply", n, name)
		}
	}
}

func absDiff(a, b uint8) int {
	if a > b {
		return int(a - b)
	}
	return int(b - a)
}
