package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// ProtocolVersion is the contract's version. A breaking change of
// proto/provider.proto bumps it; edge then refuses older plugins at the
// handshake with a clear error instead of failing calls at random.
const ProtocolVersion = 1

// Handshake is shared by edge and every provider plugin. The cookie is not
// a secret: it only stops a plugin binary run by hand from waiting forever.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "EDGE_PROVIDER_PLUGIN",
	MagicCookieValue: "5b1c0e8a-provider-v1",
}

// pluginName is the one plugin a provider binary serves.
const pluginName = "provider"

// PluginSet is the go-plugin set of a provider binary serving impl (nil on
// the host side, where only the client half is used).
func PluginSet(impl Provider) plugin.PluginSet {
	return plugin.PluginSet{pluginName: &providerPlugin{impl: impl}}
}

// Serve runs impl as a provider plugin: it is a plugin's whole main.
//
//	func main() { plugins.Serve(acme.New()) }
//
// It does not return while edge is connected; started by hand (without
// edge's handshake) it prints a hint and exits 1.
func Serve(impl Provider) {
	go exitWithParent(os.Getppid())
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         PluginSet(impl),
		GRPCServer:      plugin.DefaultGRPCServer,
		Logger: hclog.New(&hclog.LoggerOptions{
			Output: os.Stderr, JSONFormat: true, Level: hclog.Info,
		}),
	})
}

// exitWithParent ends the plugin when edge is gone. go-plugin stops its
// plugins on a clean exit, but an edge killed with SIGKILL (OOM, kubelet)
// would leave them running as orphans, re-parented to init.
func exitWithParent(ppid int) {
	for range time.Tick(parentPoll) {
		if os.Getppid() != ppid {
			os.Exit(0)
		}
	}
}

const parentPoll = time.Second

// Log is a logger for plugin code: lines go to stderr as hclog JSON, which
// edge parses and logs under the plugin's name at the same level.
var Log = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{
	Level: slog.LevelDebug,
	ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) > 0 {
			return a
		}
		switch a.Key {
		case slog.TimeKey:
			return slog.String("@timestamp", a.Value.Time().Format("2006-01-02T15:04:05.000000Z07:00"))
		case slog.LevelKey:
			return slog.String("@level", strings.ToLower(a.Value.String()))
		case slog.MessageKey:
			return slog.String("@message", a.Value.String())
		}
		return a
	},
}))

// ClientOptions are what edge needs to start a provider plugin process.
type ClientOptions struct {
	// Cmd starts the plugin binary (a fresh one per start).
	Cmd *exec.Cmd
	// SHA256, when set (hex), is checked against the binary before it runs.
	SHA256 string
	// Log receives the plugin's log lines and go-plugin's own.
	Log *slog.Logger
	// StartTimeout bounds the start and handshake (go-plugin's default, 1
	// minute, when 0).
	StartTimeout time.Duration
	// GRPCDialOptions are added to the connection to the plugin (edge's
	// tracing adds a stats handler that carries the trace context).
	GRPCDialOptions []grpc.DialOption
}

// NewClient returns a go-plugin client for one start of a provider plugin.
// Dispense with Provider.
func NewClient(o ClientOptions) (*plugin.Client, error) {
	cfg := &plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		Plugins:          PluginSet(nil),
		Cmd:              o.Cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           newHCLogger(o.Log),
		SyncStdout:       io.Discard,
		SyncStderr:       io.Discard,
		StartTimeout:     o.StartTimeout,
		GRPCDialOptions:  o.GRPCDialOptions,
	}
	if o.SHA256 != "" {
		sum, err := decodeHex(o.SHA256)
		if err != nil {
			return nil, fmt.Errorf("sha256: %w", err)
		}
		cfg.SecureConfig = &plugin.SecureConfig{Checksum: sum, Hash: sha256.New()}
	}
	return plugin.NewClient(cfg), nil
}

// Dispense returns the provider of a connected plugin: the
// ClientProtocol of a started *plugin.Client, or of go-plugin's
// TestPluginGRPCConn in tests.
func Dispense(rpc plugin.ClientProtocol) (Provider, error) {
	raw, err := rpc.Dispense(pluginName)
	if err != nil {
		return nil, err
	}
	p, ok := raw.(Provider)
	if !ok {
		return nil, fmt.Errorf("plugin dispensed %T, not a Provider", raw)
	}
	return p, nil
}

func decodeHex(s string) ([]byte, error) {
	sum, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(sum) != sha256.Size {
		return nil, fmt.Errorf("want 64 hex digits, got %q", s)
	}
	return sum, nil
}

// newHCLogger bridges go-plugin's hclog to edge's slog: every line (the
// plugin's stderr, parsed from hclog JSON, and go-plugin's own) is logged
// with the logger's attributes (edge adds plugin=<name>).
func newHCLogger(log *slog.Logger) hclog.Logger {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	il := hclog.NewInterceptLogger(&hclog.LoggerOptions{Output: io.Discard, Level: hclog.Debug})
	il.RegisterSink(slogSink{log})
	return il
}

type slogSink struct{ log *slog.Logger }

func (s slogSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	lv := slog.LevelDebug
	switch level {
	case hclog.Info:
		lv = slog.LevelInfo
	case hclog.Warn:
		lv = slog.LevelWarn
	case hclog.Error:
		lv = slog.LevelError
	}
	if !s.log.Enabled(context.Background(), lv) {
		return
	}
	args = renameKey(args, "plugin", "plugin_path")
	if name != "" {
		args = append(args, "logger", name)
	}
	s.log.Log(context.Background(), lv, msg, args...)
}

// renameKey renames key in a key-value list: go-plugin names the binary's
// path "plugin", the key edge gives the provider's name.
func renameKey(args []any, from, to string) []any {
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok && k == from {
			out := slices.Clone(args)
			out[i] = to
			return renameKey(out, from, to)
		}
	}
	return args
}
