package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
)

// ErrHelp is returned by Load when args ask for help (-h, --help). Print
// Usage and exit 0.
var ErrHelp = pflag.ErrHelp

// envPrefix starts every environment variable Load reads.
const envPrefix = "EDGE_"

// flagKeys are the dedicated flags, each a shorthand for one key.
var flagKeys = []struct{ flag, key, usage string }{
	{"listen-public", "listen.public", "public listener address (webhooks, media sockets)"},
	{"listen-admin", "listen.admin", "admin listener address (release, drain, metrics)"},
	{"listen-internal", "listen.internal", "cluster-internal listener address (the predecessor's routes); empty: off"},
	{"redis-url", "redis.url", "Redis URL; empty: embedded in-process Redis (dev only)"},
	{"public-base-url", "public_base_url", "ws:// or wss:// base of media URLs; empty: derived from --listen-public"},
	{"log-level", "log.level", "debug, info, warn or error"},
}

// Load builds the Config from defaults, the file named by --config, EDGE_*
// variables of environ (os.Environ() form, "KEY=value") and the flags in args
// (without the program name), each layer over the one before, and validates
// it. The error names each bad key and value; with -h or --help it is
// ErrHelp.
func Load(args []string, environ []string) (*Config, error) {
	fl, err := parseFlags(args)
	if err != nil {
		return nil, err
	}
	var file []byte
	if fl.path != "" {
		if file, err = os.ReadFile(fl.path); err != nil {
			return nil, fmt.Errorf("read config file: %w", err)
		}
	}
	return load(fl, environ, file)
}

// Usage is the flags' help text.
func Usage() string { return newFlagSet().FlagUsages() }

// flags is parsed args, kept so the Watcher can reload with the same ones.
type flags struct {
	fs   *pflag.FlagSet
	path string         // --config
	sets map[string]any // --set, flat keys
}

func newFlagSet() *pflag.FlagSet {
	fs := pflag.NewFlagSet("edge", pflag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned, help is Usage()
	fs.SortFlags = false
	fs.String("config", "", "YAML config `file`, polled for changes")
	defaults := flatten(Default())
	for _, f := range flagKeys {
		fs.String(f.flag, defaults[f.key], f.usage)
	}
	fs.StringArray("set", nil, "set any key, e.g. --set allocator.lease_ttl=45s (repeatable, later wins)")
	return fs
}

func parseFlags(args []string) (*flags, error) {
	fs := newFlagSet()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, ErrHelp
		}
		return nil, fmt.Errorf("parse flags: %w", err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("parse flags: unexpected argument %q", fs.Arg(0))
	}
	path, _ := fs.GetString("config")
	pairs, _ := fs.GetStringArray("set")
	sets := make(map[string]any, len(pairs))
	for _, kv := range pairs {
		key, val, ok := strings.Cut(kv, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return nil, fmt.Errorf("parse flags: --set %q: want key.path=value", kv)
		}
		if !knownKey(key) {
			return nil, fmt.Errorf("parse flags: --set: unknown key %q", key)
		}
		sets[key] = val
	}
	return &flags{fs: fs, path: path, sets: sets}, nil
}

// envProvider reads the EDGE_* variables of environ as keys:
// EDGE_REDIS__URL -> redis.url. A variable that names no key is ignored
// unless it nests with "__": only edge's own variables do, Kubernetes
// service variables (EDGE_SERVICE_HOST, EDGE_PORT_8080_TCP) never. Those
// are errors, appended to errs as the provider reads.
func envProvider(environ []string, errs *[]error) koanf.Provider {
	return env.Provider(".", env.Opt{
		Prefix:      envPrefix,
		EnvironFunc: func() []string { return environ },
		TransformFunc: func(name, val string) (string, any) {
			rest := strings.TrimPrefix(name, envPrefix)
			key := strings.ToLower(strings.ReplaceAll(rest, "__", "."))
			switch {
			case rest == "":
			case knownKey(key):
				return key, val
			case strings.Contains(rest, "__"):
				*errs = append(*errs, fmt.Errorf("environment %s: unknown key %q", name, key))
			}
			return "", nil
		},
	})
}

// load layers file (nil: no file), environ and fl over the defaults.
func load(fl *flags, environ []string, file []byte) (*Config, error) {
	k := koanf.New(".")
	if file != nil {
		// The bytes the Watcher hashed, not a second read of the file.
		if err := k.Load(rawbytes.Provider(file), yaml.Parser()); err != nil {
			return nil, fmt.Errorf("config file %s: %w", fl.path, err)
		}
	}
	var envErrs []error
	flagLayer := posflag.ProviderWithFlag(fl.fs, ".", nil, func(f *pflag.Flag) (string, any) {
		for _, fk := range flagKeys {
			if fk.flag == f.Name {
				return fk.key, f.Value.String()
			}
		}
		return "", nil // --config, --set: not keys
	})
	for _, layer := range []struct {
		name string
		p    koanf.Provider
	}{
		{"environment", envProvider(environ, &envErrs)},
		{"--set", confmap.Provider(fl.sets, ".")},
		{"flags", flagLayer},
	} {
		if err := k.Load(layer.p, nil); err != nil {
			return nil, fmt.Errorf("%s: %w", layer.name, err)
		}
	}
	if len(envErrs) > 0 {
		return nil, errors.Join(envErrs...)
	}

	// Decoding over the defaults (rather than loading them as a layer with
	// koanf's structs provider) keeps durations typed: as a layer they
	// would arrive as bare numbers, which durationHook refuses.
	cfg := Default()
	// tiers and default_chain are raw: the allocator parses them.
	rawTiers, rawChain := k.Get("tiers"), k.Get("default_chain")
	k.Delete("tiers")
	k.Delete("default_chain")
	if err := decode(k, cfg, fl.path); err != nil {
		return nil, err
	}
	var err error
	if cfg.Allocator.Tiers, err = parseTiers(rawTiers, rawChain); err != nil {
		return nil, err
	}
	cfg.normalize()
	cfg.link()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// decode unmarshals k over cfg's defaults. Only the file can bring unknown
// keys this far (environment and --set are checked against knownKey), so an
// unknown key is reported against it.
func decode(k *koanf.Koanf, cfg *Config, path string) error {
	err := k.UnmarshalWithConf("", cfg, koanf.UnmarshalConf{
		DecoderConfig: &mapstructure.DecoderConfig{
			DecodeHook:       mapstructure.ComposeDecodeHookFunc(durationHook, numberHook, jsonHook, tokensHook),
			ErrorUnused:      true,
			WeaklyTypedInput: true,
			TagName:          "koanf",
		},
	})
	if err == nil {
		return nil
	}
	// mapstructure wraps a tree of *DecodeError; flatten it into one error
	// per key, without its "decoding failed" banner.
	var errs []error
	var walk func(error)
	walk = func(e error) {
		switch e := e.(type) {
		case *mapstructure.DecodeError:
			errs = append(errs, describeDecodeError(e, path)...)
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				walk(inner)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		case nil:
		default:
			errs = append(errs, e)
		}
	}
	walk(err)
	if len(errs) == 0 {
		return fmt.Errorf("decode config: %w", err)
	}
	return errors.Join(errs...)
}

// rootTypeName is how mapstructure (v2.5 on) names the top level of the
// file in an error, where it used to give an empty name.
var rootTypeName = reflect.TypeFor[Config]().String()

func describeDecodeError(e *mapstructure.DecodeError, file string) []error {
	msg := e.Unwrap().Error()
	name := e.Name()
	if name == rootTypeName {
		name = ""
	}
	unused, ok := strings.CutPrefix(msg, "has invalid keys: ")
	if !ok {
		return []error{fmt.Errorf("%s: %s", name, msg)}
	}
	var errs []error
	for key := range strings.SplitSeq(unused, ", ") {
		if name != "" {
			key = name + "." + key
		}
		err := fmt.Errorf("config file %s: unknown key %q", file, key)
		if key == "providers.trust_forwarded" {
			err = fmt.Errorf("%w: replaced by trusted_proxies, a list of the load balancers' CIDRs (trusting everyone must be spelled out: [0.0.0.0/0, ::/0])", err)
		}
		errs = append(errs, err)
	}
	return errs
}
