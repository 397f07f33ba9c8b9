package runtimee2e

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/edge-voice/edge/internal/fakeagent"
	"github.com/edge-voice/edge/internal/testredis"
	"github.com/edge-voice/edge/internal/testwait"
)

// edge's image under runc with what deploy/ gives its pod, once per shipped
// seccomp profile: deploy/base under the runtime's default (podman's, as
// CRI-O's RuntimeDefault), deploy/overlays/uring under the Localhost
// profile its component ships, and the uring overlay's relay under the
// default profile, which refuses io_uring (edge must fall back to epoll
// and say so). Through each: the runtime applied what deploy/ says (uid,
// no capabilities, no_new_privs, a seccomp filter, read-only root, /tmp a
// tmpfs of the emptyDir's size), a signed Twilio webhook answered through
// the plugin process, a forged one refused, a media socket carried by the
// intended relay, the twilio plugin killed and restarted, and SIGTERM
// ending edge with exit code 0 within the grace period.
func TestEdgeRunsAsDeployed(t *testing.T) {
	image := need(t)
	for _, tc := range []struct {
		name, dir string
		// runtimeDefault replaces the rendered profile with the runtime's.
		runtimeDefault bool
		relay          string // the relay that must run
		fallback       bool   // edge must say that io_uring was refused
	}{
		{name: "base under RuntimeDefault", dir: "base", relay: "epoll"},
		{name: "uring overlay under its Localhost profile", dir: "overlays/uring", relay: "uring"},
		{name: "uring relay under RuntimeDefault", dir: "overlays/uring", runtimeDefault: true, relay: "epoll", fallback: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, tc.dir)
			if tc.runtimeDefault {
				r.dep.Spec.Template.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
			}
			runDeployed(t, image, r, tc.relay, tc.fallback)
		})
	}
}

func runDeployed(t *testing.T, image string, r rendered, relay string, fallback bool) {
	redis := testredis.Start(t, testredis.TCP())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var static []map[string]string
	for i := range 2 {
		ag, err := fakeagent.Listen("127.0.0.1:0", nil)
		if err != nil {
			t.Fatal(err)
		}
		go ag.Run(ctx)
		static = append(static, map[string]string{"name": fmt.Sprintf("agent-%d", i), "address": ag.Addr(), "tier": firstTier(t, r)})
	}
	staticJSON, _ := json.Marshal(static)

	adminToken, twilioToken := secret(t), secret(t)
	secrets := map[string]string{
		"edge-admin/token":                adminToken,
		"edge-secrets/media-token-secret": secret(t),
		"edge-secrets/twilio-auth-tokens": twilioToken,
		"edge-secrets/plivo-auth-tokens":  secret(t),
		"edge-secrets/exotel-credentials": "edge:" + secret(t),
	}
	const webhookBase = "https://edge.example.com"
	ctr := podmanRun(t, r, image, secrets,
		// This machine's stand-ins for the cluster: loopback listeners on
		// the host network, a Redis and static pods on the host.
		"EDGE_LISTEN__PUBLIC=127.0.0.1:0", "EDGE_LISTEN__ADMIN=127.0.0.1:0", "EDGE_LISTEN__INTERNAL=127.0.0.1:0",
		"EDGE_REDIS__URL="+redis.URL(),
		"EDGE_PODS__SOURCE=static", "EDGE_PODS__STATIC="+string(staticJSON),
		"EDGE_PROVIDERS__WEBHOOK_BASE_URL="+webhookBase, "EDGE_PUBLIC_BASE_URL=wss://edge.example.com")
	t.Log(ctr.redacted())
	c := start(t, ctr.args)
	admin := &client{t: t, base: c.admin, token: adminToken}

	checkConfined(t, c.pid(), ctr, r)

	testwait.Until(t, 60*time.Second, "edge ready", func() bool { return admin.status("/readyz") == http.StatusOK })
	configured := "epoll"
	for _, e := range r.dep.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "EDGE_PROXY__RELAY" {
			configured = e.Value
		}
	}
	info := `edge_proxy_relay_info{configured="` + configured + `",running="` + relay + `"}`
	testwait.Until(t, 60*time.Second, info, func() bool { return admin.metric(info) == 1 })
	if fallback {
		// Log lines leave in batches: wait for it.
		testwait.Until(t, 60*time.Second, "the warning that io_uring was refused", func() bool { return strings.Contains(c.Log(), "uring relay unavailable") })
	} else if strings.Contains(c.Log(), "uring relay unavailable") {
		t.Errorf("edge fell back from io_uring under %q:\n%s", ctr.seccomp, c.Log())
	}
	for _, name := range []string{"twilio", "plivo", "exotel", "telnyx"} {
		if len(children(c.pid(), "plugin "+name)) != 1 {
			t.Errorf("no %s plugin process in the container", name)
		}
	}

	// A signed webhook through the twilio plugin, its media socket echoed
	// by the agent through the relay; a forged one refused.
	wh := &webhooks{t: t, public: c.public, base: webhookBase, token: twilioToken}
	if status, _ := wh.post("CA00000000000000000000000000000f01", "forged"); status != http.StatusForbidden {
		t.Errorf("forged webhook: %d, want 403", status)
	}
	media := wh.stream("CA00000000000000000000000000000f02")
	echo(t, c.public, media)
	sockets := `edge_proxy_relayed_sockets_total{client="tcp",relay="` + relay + `"}`
	testwait.Until(t, 60*time.Second, sockets+" 1", func() bool { return admin.metric(sockets) == 1 })

	// The twilio plugin killed: edge starts it again (fork and exec under
	// the profile) and the next webhook is answered.
	plugins := children(c.pid(), "plugin twilio")
	if len(plugins) != 1 {
		t.Fatalf("twilio plugin processes: %v", plugins)
	}
	if err := syscall.Kill(plugins[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 60*time.Second, "the twilio plugin restarted", func() bool {
		again := children(c.pid(), "plugin twilio")
		return len(again) == 1 && again[0] != plugins[0] &&
			admin.metric(`edge_plugin_restarts_total{plugin="twilio"}`) >= 1 && admin.status("/readyz") == http.StatusOK
	})
	echo(t, c.public, wh.stream("CA00000000000000000000000000000f03"))

	// SIGTERM: readiness off, http.shutdown_delay of serving, then a clean
	// exit, well inside terminationGracePeriodSeconds.
	grace := time.Duration(ctr.grace) * time.Second
	took, code := c.stop(grace)
	t.Logf("SIGTERM to exit: %v (grace %v)", took.Round(time.Millisecond), grace)
	if code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
	if took >= grace {
		t.Errorf("edge took %v to stop, the grace period is %v", took, grace)
	}
	for _, bad := range []string{"SIGSYS", "panic:", "operation not permitted", "read-only file system"} {
		if strings.Contains(c.Log(), bad) && !(fallback && bad == "operation not permitted") {
			t.Errorf("%q in the container's log", bad)
		}
	}
}

// checkConfined reads from the host what the runtime applied to edge's
// process: the uid and its group from the image's passwd, no capability
// at all, no_new_privs, a seccomp filter, a read-only root, /tmp a tmpfs
// of the emptyDir's size, the config read-only.
func checkConfined(t *testing.T, pid int, ctr container, r rendered) {
	t.Helper()
	status := string(readFile(t, fmt.Sprintf("/proc/%d/status", pid)))
	field := func(name string) string {
		for _, line := range strings.Split(status, "\n") {
			if v, ok := strings.CutPrefix(line, name+":"); ok {
				return strings.Join(strings.Fields(v), " ")
			}
		}
		return ""
	}
	uid := strconv.FormatInt(ctr.uid, 10)
	want := map[string]string{
		"Uid": strings.Repeat(uid+" ", 3) + uid, "Gid": strings.Repeat(uid+" ", 3) + uid,
		"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
		"CapBnd": "0000000000000000", "CapAmb": "0000000000000000",
		"NoNewPrivs": "1", "Seccomp": "2",
	}
	for k, v := range want {
		if got := field(k); got != v {
			t.Errorf("edge's %s: %q, want %q", k, got, v)
		}
	}
	mounts := map[string][]string{} // mount point -> mount options, fs type, super options
	for _, line := range strings.Split(string(readFile(t, fmt.Sprintf("/proc/%d/mountinfo", pid))), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f := strings.Fields(pre)
		if !ok || len(f) < 6 {
			continue
		}
		mounts[f[4]] = append([]string{f[5]}, strings.Fields(post)...)
	}
	opts := func(point string) []string {
		m := mounts[point]
		if len(m) < 4 {
			t.Errorf("nothing mounted at %s", point)
			return nil
		}
		return append(strings.Split(m[0], ","), strings.Split(m[3], ",")...)
	}
	if o := opts("/"); !slices.Contains(o, "ro") {
		t.Errorf("the root filesystem is mounted %v, want ro", o)
	}
	if m := mounts["/tmp"]; len(m) < 2 || m[1] != "tmpfs" || !slices.Contains(opts("/tmp"), "rw") {
		t.Errorf("/tmp is %v, want a writable tmpfs", m)
	}
	for _, v := range r.dep.Spec.Template.Spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil {
			size := "size=" + strconv.FormatInt(v.EmptyDir.SizeLimit.Value()/1024, 10) + "k"
			if !slices.Contains(opts("/tmp"), size) {
				t.Errorf("/tmp is mounted %v, want %s (the emptyDir's sizeLimit)", opts("/tmp"), size)
			}
		}
	}
	if o := opts("/etc/edge"); !slices.Contains(o, "ro") {
		t.Errorf("/etc/edge is mounted %v, want ro", o)
	}
}

// The image on its own, as `podman run localhost/edge:dev` starts it: the
// embedded default (in-process Redis, fake agents) with the built-in
// plugins as child processes of /edge, as the image's user, and a
// webhook answered through the twilio plugin.
func TestImageStartsItsQuickStart(t *testing.T) {
	image := need(t)
	out, err := exec.Command("podman", "image", "inspect", "--format", "{{.Config.User}} {{json .Config.Entrypoint}}", image).Output()
	if err != nil {
		t.Fatal(err)
	}
	r := render(t, "base")
	uid := strconv.FormatInt(*r.dep.Spec.Template.Spec.Containers[0].SecurityContext.RunAsUser, 10)
	if got, want := strings.TrimSpace(string(out)), uid+":"+uid+` ["/edge"]`; got != want {
		t.Errorf("image user and entrypoint %q, want %q", got, want)
	}
	c := start(t, []string{"run", "--runtime", "runc", "--network", "host",
		"--ulimit", "nofile=" + hardLimit(t, syscall.RLIMIT_NOFILE, 0), "--ulimit", "nproc=" + hardLimit(t, 6, pidMax(t)),
		image, "--listen-public", "127.0.0.1:0", "--listen-admin", "127.0.0.1:0", "--listen-internal", "127.0.0.1:0"})
	admin := &client{t: t, base: c.admin}
	testwait.Until(t, 60*time.Second, "edge ready", func() bool { return admin.status("/readyz") == http.StatusOK })
	for _, name := range []string{"twilio", "plivo", "exotel", "telnyx"} {
		if len(children(c.pid(), "plugin "+name)) != 1 {
			t.Errorf("no %s plugin process", name)
		}
	}
	// The embedded default takes unsigned webhooks.
	resp, err := http.PostForm(c.public+"/api/v1/twilio/allocate?merchant_id=demo", url.Values{"CallSid": {"CA00000000000000000000000000000f10"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !twimlStream.Match(body) {
		t.Errorf("webhook: %s %s", resp.Status, body)
	}
	if took, code := c.stop(30 * time.Second); code != 0 {
		t.Errorf("exit code %d after SIGTERM (%v)", code, took)
	}
}

// firstTier is the first tier of the config's default chain: where the
// static pods go, so that a call of the default chain gets one.
func firstTier(t *testing.T, r rendered) string {
	t.Helper()
	var cfg struct {
		DefaultChain []string `json:"default_chain"`
	}
	if err := yaml.Unmarshal([]byte(r.config.Data["edge.yaml"]), &cfg); err != nil || len(cfg.DefaultChain) == 0 {
		t.Fatalf("the ConfigMap's edge.yaml has no default_chain: %v", err)
	}
	return cfg.DefaultChain[0]
}

func secret(t *testing.T) string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// client reads edge's admin listener with its token.
type client struct {
	t           *testing.T
	base, token string
}

func (c *client) get(path string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, c.base+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return http.DefaultClient.Do(req)
}

func (c *client) status(path string) int {
	resp, err := c.get(path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// metric reads one sample of /metrics (0 when absent).
func (c *client) metric(series string) float64 {
	resp, err := c.get("/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// webhooks posts Twilio voice webhooks signed as Twilio signs them: HMAC-
// SHA1 with the auth token over the URL it called and the sorted form.
type webhooks struct {
	t                   *testing.T
	public, base, token string
}

const webhookPath = "/api/v1/twilio/allocate?merchant_id=demo"

var twimlStream = regexp.MustCompile(`<Stream url="([^"]+)"`)

func (w *webhooks) post(callSid, token string) (int, []byte) {
	w.t.Helper()
	form := url.Values{"CallSid": {callSid}, "From": {"+15550100"}, "To": {"+15550199"}}
	names := make([]string, 0, len(form))
	for n := range form {
		names = append(names, n)
	}
	sort.Strings(names)
	signed := w.base + webhookPath
	for _, n := range names {
		signed += n + form.Get(n)
	}
	mac := hmac.New(sha1.New, []byte(token))
	mac.Write([]byte(signed))
	req, _ := http.NewRequest(http.MethodPost, w.public+webhookPath, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Twilio-Signature", base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// stream posts a signed webhook and returns the path of the media URL its
// TwiML names (the host is public_base_url's).
func (w *webhooks) stream(callSid string) string {
	w.t.Helper()
	status, body := w.post(callSid, w.token)
	m := twimlStream.FindSubmatch(body)
	if status != http.StatusOK || m == nil {
		w.t.Fatalf("signed webhook: %d %s", status, body)
	}
	u, err := url.Parse(html.UnescapeString(string(m[1])))
	if err != nil {
		w.t.Fatal(err)
	}
	return u.RequestURI()
}

// echo opens the media socket at path on the public listener, has the
// agent echo a few messages and closes it.
func echo(t *testing.T, public, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws://"+strings.TrimPrefix(public, "http://")+path, nil)
	if err != nil {
		t.Fatalf("media socket %s: %v", path, err)
	}
	defer conn.CloseNow()
	for i := range 20 {
		msg := fmt.Sprintf(`{"event":"media","sequenceNumber":"%d"}`, i)
		if err := conn.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatalf("write: %v", err)
		}
		_, got, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if string(got) != msg {
			t.Fatalf("echo %q, want %q", got, msg)
		}
	}
	conn.Close(websocket.StatusNormalClosure, "done")
}
