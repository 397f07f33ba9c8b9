// Package config composes edge's settings: each component declares its own
// Config with its defaults and Validate (api, allocator, poolmgr, proxy,
// providers, tlsconf), and this package holds them as the sections of one Config,
// loads them in layers, checks what spans sections, hides secrets, and
// reloads the safe ones while edge runs.
//
// # Layers
//
// Load builds one Config from, lowest precedence first:
//
//  1. Default(): the components' DefaultConfig, where each default is
//     written once.
//  2. the YAML file named by --config (no file: this layer is empty).
//  3. EDGE_* environment variables.
//  4. command-line flags: --set key.path=value (repeatable, in order), then the
//     dedicated flags --listen-public, --listen-admin, --listen-internal,
//     --redis-url, --public-base-url and --log-level.
//
// Keys are snake_case and nested with dots, as in the YAML file:
// redis.url, allocator.lease_ttl, pods.static. Durations are Go duration
// strings ("500ms", "30s", "6m"); a bare number is refused because
// "lease_ttl: 60" would otherwise mean 60ns.
//
// # Environment
//
// A variable EDGE_<KEY> sets <key> lower-cased, with a double underscore
// between nesting levels and a single underscore kept as part of the name:
//
//	EDGE_REDIS__URL=redis://redis:6379/0      redis.url
//	EDGE_PUBLIC_BASE_URL=wss://edge.example   public_base_url
//	EDGE_ALLOCATOR__LEASE_TTL=45s             allocator.lease_ttl
//	EDGE_TIERS='{"tiers":{...}}'              tiers (one JSON value)
//	EDGE_PODS__STATIC='[{"name":"a",...}]'    pods.static (one JSON value)
//
// Lists and maps are given as one JSON value; default_chain also takes a
// comma-separated list. A variable with no "__" that names no key is ignored,
// because Kubernetes injects service variables such as EDGE_SERVICE_HOST and
// EDGE_PORT into every pod of the namespace; one with "__" that names no key
// is an error, and so is an unknown key in the file or in --set, because
// operators mistype keys.
//
// # Tiers
//
// The file's top-level `tiers` value (or EDGE_TIERS holding JSON) is handed
// to allocator.ParseTierConfig as it is, so all three shapes the predecessor
// accepted work: the envelope {"tiers":{...},"default_chain":[...]}, a map of
// tier name to tier object, and a map of tier name to target. A top-level
// `default_chain` replaces the parsed chain. Without `tiers`,
// allocator.DefaultTiers applies. Operators change tiers at runtime through Redis; the config's
// tiers only bootstrap voice:tier:config.
//
// # From the predecessor's settings
//
// The README maps each of the predecessor's environment variables
// (REDIS_URL, LEASE_TTL, TIER_CONFIG, ...) to its key and EDGE_ name.
//
// # Reload
//
// A Watcher polls the file (by content hash, so Kubernetes ConfigMap symlink
// swaps are seen), loads it again with the same flags and environment, and
// publishes the result unless it is invalid. Fields tagged reload:"restart"
// (listeners, Redis, leader election, ...) keep their running values until
// edge restarts; the Watcher says which changed.
package config
