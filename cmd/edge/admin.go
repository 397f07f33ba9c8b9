package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/edge-voice/edge/allocator"
)

func init() { subcommands["admin"] = adminCommand }

const adminUsage = `usage: edge admin [--url URL] [--token TOKEN] [-o table|json] COMMAND

A client of a running replica's admin API (the admin listener). Prints
tables and "key: value" lines, or the API's JSON with -o json; exits 1
with the reason when the API refuses or cannot be reached.

Pods and calls:
  status                         calls and pods per tier and pool (available,
                                 assigned, calls, draining, ejected), and
                                 whether this replica leads
  pods                           every pod with its state (available,
                                 allocated, draining, ejected, unready),
                                 tier, calls and address
  pod POD                        one pod's whole record (its ejection too)
  drain POD                      take a pod out of allocation; its calls
                                 finish (for allocator.draining_ttl)
  undrain POD                    end a drain: the pod takes calls again
  release CALL_SID               end a call's allocation and free its pod
                                 (what an agent's release does)
  call CALL_SID                  print the call's timeline: live or ended,
                                 merchant, pod, socket opened/closed, close
                                 code, messages and bytes, failovers, moves
                                 mid-call (resumptions, resumed_at)
  calls POD                      list the pod's live calls

Configuration:
  config                         the replica's running configuration, key
                                 by key, secrets hidden
  tiers get                      print voice:tier:config
  tiers set JSON|FILE|-          store a tier config (any accepted shape):
                                 inline JSON ('{"gold":1,"standard":2}'),
                                 a file, or - for standard input
  merchants list                 print every merchant config
  merchants get ID
  merchants set ID JSON          e.g. '{"pool":"acme","fallback":["gold","basic"],"max_calls":50}'
                                 (max_calls: most live calls, 1..1000000; absent = no cap)
  merchants delete ID
  pools list                     print merchant pool targets
  pools set POOL TARGET          tier assignment fills merchant pools first
  log-level [LEVEL]              print the log level, or set it (debug, info,
                                 warn, error) at once, without a restart

--url defaults to $EDGE_ADMIN_URL or http://127.0.0.1:9090; --token to
$EDGE_ADMIN_TOKEN. The status page is the same listener's root, /, in a
browser (any user name, the admin token as the password).
`

// adminCall is one command as an admin API request, and how its answer is
// shown as text (nil: the JSON, indented).
type adminCall struct {
	method, path string
	body         io.Reader
	show         func(w io.Writer, answer []byte) error
}

// adminCommand is `edge admin ...`.
func adminCommand(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	env := func(k string) string {
		for _, kv := range environ {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				return v
			}
		}
		return ""
	}
	fs := pflag.NewFlagSet("edge admin", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, adminUsage) }
	base := fs.String("url", cmp.Or(env("EDGE_ADMIN_URL"), "http://127.0.0.1:9090"), "admin listener base URL")
	token := fs.String("token", env("EDGE_ADMIN_TOKEN"), "admin bearer token")
	output := fs.StringP("output", "o", "table", "table (text) or json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *output != "table" && *output != "json" {
		return fmt.Errorf("-o %q: want table or json", *output)
	}
	c, err := adminRequest(fs.Args())
	if errors.Is(err, errAdminUsage) {
		fs.Usage()
	}
	if err != nil {
		return err
	}
	answer, err := adminDo(ctx, *base, *token, c)
	if err != nil {
		return err
	}
	if *output == "json" || c.show == nil {
		var pretty bytes.Buffer
		if json.Indent(&pretty, answer, "", "  ") == nil {
			answer = append(pretty.Bytes(), '\n')
		}
		_, err = stdout.Write(answer)
		return err
	}
	return c.show(stdout, answer)
}

// adminDo sends the request and returns the answer's body, or an error
// that says what to do: the listener unreachable, the token refused, the
// API's own reason for a refusal.
func adminDo(ctx context.Context, base, token string, c adminCall) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	u := strings.TrimRight(base, "/") + c.path
	req, err := http.NewRequestWithContext(ctx, c.method, u, c.body)
	if err != nil {
		return nil, fmt.Errorf("admin API URL %q: %w", base, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the admin API at %s (--url or $EDGE_ADMIN_URL): %w", base, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("admin API %s %s: reading the answer: %w", c.method, c.path, err)
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		if token == "" {
			return nil, errors.New("unauthorized: the admin API wants its token (--token or $EDGE_ADMIN_TOKEN)")
		}
		return nil, errors.New("unauthorized: the admin API refused the token (--token or $EDGE_ADMIN_TOKEN)")
	case resp.StatusCode >= 300:
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(out, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(out))
		}
		return nil, fmt.Errorf("%s %s: %s: %s", c.method, c.path, resp.Status, e.Error)
	}
	return out, nil
}

var errAdminUsage = errors.New("unknown or incomplete admin command (edge admin --help)")

// adminRequest maps a command line to an admin API request. Pod names
// and call ids are checked as edge checks them before anything is sent.
func adminRequest(args []string) (adminCall, error) {
	usage := errAdminUsage
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	if len(args) == 0 {
		return adminCall{}, usage
	}
	esc := url.PathEscape
	get := func(path string, show func(io.Writer, []byte) error) (adminCall, error) {
		return adminCall{method: http.MethodGet, path: path, show: show}, nil
	}
	post := func(path string, body any, show func(io.Writer, []byte) error) (adminCall, error) {
		b, _ := json.Marshal(body)
		return adminCall{method: http.MethodPost, path: path, body: bytes.NewReader(b), show: show}, nil
	}
	// one is a command taking one pod name or call id.
	one := func(kind string) (string, error) {
		if len(args) != 2 {
			return "", usage
		}
		return args[1], allocator.ValidateID(kind, args[1])
	}
	switch args[0] {
	case "status":
		if len(args) != 1 {
			return adminCall{}, usage
		}
		return get("/api/v1/status", showStatus)
	case "pods":
		if len(args) != 1 {
			return adminCall{}, usage
		}
		return get("/api/v1/pods", showPods)
	case "config":
		if len(args) != 1 {
			return adminCall{}, usage
		}
		return get("/api/v1/config", showKeys("config"))
	case "pod":
		pod, err := one("pod_name")
		if err != nil {
			return adminCall{}, err
		}
		return get("/api/v1/pod/"+esc(pod), showKeys("pod"))
	case "drain", "undrain":
		pod, err := one("pod_name")
		if err != nil {
			return adminCall{}, err
		}
		return post("/api/v1/"+args[0], map[string]string{"pod_name": pod}, showMessage)
	case "release":
		id, err := one("call_sid")
		if err != nil {
			return adminCall{}, err
		}
		return post("/api/v1/release", map[string]string{"call_sid": id}, showRelease(id))
	case "call":
		id, err := one("call_sid")
		if err != nil {
			return adminCall{}, err
		}
		return get("/api/v1/calls/"+esc(id), showKeys("call"))
	case "calls":
		pod, err := one("pod_name")
		if err != nil {
			return adminCall{}, err
		}
		return get("/api/v1/calls?"+url.Values{"pod": {pod}}.Encode(), showCalls)
	case "log-level":
		switch len(args) {
		case 1:
			return get("/api/v1/log-level", nil)
		case 2:
			b, _ := json.Marshal(map[string]string{"level": args[1]})
			return adminCall{method: http.MethodPut, path: "/api/v1/log-level", body: bytes.NewReader(b)}, nil
		}
		return adminCall{}, usage
	}
	if len(args) < 2 {
		return adminCall{}, usage
	}
	switch args[0] + " " + args[1] {
	case "tiers get":
		return get("/api/v1/config/tiers", nil)
	case "tiers set":
		// Inline JSON as `merchants set` takes it; a file name never
		// starts with "{" in practice, and "./{...}" still reads one.
		var data []byte
		var err error
		switch f := arg(2); {
		case f == "":
			return adminCall{}, usage
		case strings.HasPrefix(strings.TrimSpace(f), "{"):
			data = []byte(f)
		case f == "-":
			data, err = io.ReadAll(os.Stdin)
		default:
			data, err = os.ReadFile(f)
		}
		return adminCall{method: http.MethodPut, path: "/api/v1/config/tiers", body: bytes.NewReader(data)}, err
	case "merchants list":
		return get("/api/v1/config/merchants", nil)
	case "merchants get", "merchants delete":
		if arg(2) == "" {
			return adminCall{}, usage
		}
		m := map[string]string{"get": http.MethodGet, "delete": http.MethodDelete}[args[1]]
		return adminCall{method: m, path: "/api/v1/config/merchants/" + esc(arg(2))}, nil
	case "merchants set":
		if arg(2) == "" || arg(3) == "" {
			return adminCall{}, usage
		}
		return adminCall{method: http.MethodPut, path: "/api/v1/config/merchants/" + esc(arg(2)), body: strings.NewReader(arg(3))}, nil
	case "pools list":
		return get("/api/v1/config/merchant-pools", nil)
	case "pools set":
		n, convErr := strconv.Atoi(arg(3))
		if arg(2) == "" || convErr != nil {
			return adminCall{}, usage
		}
		return adminCall{method: http.MethodPut, path: "/api/v1/config/merchant-pools/" + esc(arg(2)),
			body: strings.NewReader(fmt.Sprintf(`{"target":%d}`, n))}, nil
	}
	return adminCall{}, usage
}
