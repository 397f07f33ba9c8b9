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
)

func init() { subcommands["admin"] = adminCommand }

const adminUsage = `usage: edge admin [--url URL] [--token TOKEN] COMMAND

Reads and writes edge's tier and merchant config through the admin API
(validated there; nothing edits Redis by hand).

  tiers get                      print voice:tier:config
  tiers set FILE|-               store a tier config (JSON, any accepted shape)
  merchants list                 print every merchant config
  merchants get ID
  merchants set ID JSON          e.g. '{"pool":"acme","fallback":["gold","basic"],"max_calls":50}'
                                 (max_calls: most live calls, 1..1000000; absent = no cap)
  merchants delete ID
  pools list                     print merchant pool targets
  pools set POOL TARGET          tier assignment fills merchant pools first
  log-level [LEVEL]              print the log level, or set it (debug, info,
                                 warn, error) at once, without a restart
  call CALL_SID                  print the call's timeline: live or ended,
                                 merchant, pod, socket opened/closed, close
                                 code, messages and bytes, failovers
  calls POD                      list the pod's live calls

--url defaults to $EDGE_ADMIN_URL or http://127.0.0.1:9090; --token to
$EDGE_ADMIN_TOKEN.
`

// adminCommand is `edge admin ...`: a thin client of the admin config API.
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
	if err := fs.Parse(args); err != nil {
		return err
	}
	method, path, body, err := adminRequest(fs.Args())
	if err != nil {
		fs.Usage()
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(*base, "/")+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if *token != "" {
		req.Header.Set("Authorization", "Bearer "+*token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("admin API: %w", err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("admin API: %w", err)
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, out, "", "  ") == nil {
		out = append(pretty.Bytes(), '\n')
	}
	if resp.StatusCode >= 300 {
		stderr.Write(out)
		return fmt.Errorf("admin API: %s %s: %s", method, path, resp.Status)
	}
	_, err = stdout.Write(out)
	return err
}

// adminRequest maps a command line to an admin API request.
func adminRequest(args []string) (method, path string, body io.Reader, err error) {
	usage := errors.New("unknown or incomplete admin command")
	if len(args) > 0 && args[0] == "log-level" {
		switch len(args) {
		case 1:
			return http.MethodGet, "/api/v1/log-level", nil, nil
		case 2:
			b, _ := json.Marshal(map[string]string{"level": args[1]})
			return http.MethodPut, "/api/v1/log-level", bytes.NewReader(b), nil
		}
		return "", "", nil, usage
	}
	if len(args) == 2 && args[0] == "call" {
		return http.MethodGet, "/api/v1/calls/" + url.PathEscape(args[1]), nil, nil
	}
	if len(args) == 2 && args[0] == "calls" {
		return http.MethodGet, "/api/v1/calls?" + url.Values{"pod": {args[1]}}.Encode(), nil, nil
	}
	if len(args) < 2 {
		return "", "", nil, usage
	}
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	esc := url.PathEscape
	switch args[0] + " " + args[1] {
	case "tiers get":
		return http.MethodGet, "/api/v1/config/tiers", nil, nil
	case "tiers set":
		var data []byte
		switch f := arg(2); f {
		case "":
			return "", "", nil, usage
		case "-":
			data, err = io.ReadAll(os.Stdin)
		default:
			data, err = os.ReadFile(f)
		}
		return http.MethodPut, "/api/v1/config/tiers", bytes.NewReader(data), err
	case "merchants list":
		return http.MethodGet, "/api/v1/config/merchants", nil, nil
	case "merchants get", "merchants delete":
		if arg(2) == "" {
			return "", "", nil, usage
		}
		m := map[string]string{"get": http.MethodGet, "delete": http.MethodDelete}[args[1]]
		return m, "/api/v1/config/merchants/" + esc(arg(2)), nil, nil
	case "merchants set":
		if arg(2) == "" || arg(3) == "" {
			return "", "", nil, usage
		}
		return http.MethodPut, "/api/v1/config/merchants/" + esc(arg(2)), strings.NewReader(arg(3)), nil
	case "pools list":
		return http.MethodGet, "/api/v1/config/merchant-pools", nil, nil
	case "pools set":
		n, convErr := strconv.Atoi(arg(3))
		if arg(2) == "" || convErr != nil {
			return "", "", nil, usage
		}
		return http.MethodPut, "/api/v1/config/merchant-pools/" + esc(arg(2)), strings.NewReader(fmt.Sprintf(`{"target":%d}`, n)), nil
	}
	return "", "", nil, usage
}
