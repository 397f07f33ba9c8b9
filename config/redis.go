package config

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is the connection to the Redis that holds the pool state (restart:
// the client is built once).
type Redis struct {
	// URL is "redis://[user:password@]host:6379/0", "rediss://..." for TLS,
	// or "unix:///path/to/redis.sock", in go-redis's ParseURL syntax. Empty
	// (the default) runs an embedded in-process Redis: development only,
	// state is lost on exit and not shared between replicas.
	URL string `koanf:"url" secret:"url"`
	// KeyPrefix starts every key edge reads or writes. Default "voice:",
	// the predecessor's, so that migrating is pointing edge at the same
	// Redis. A hash tag such as "{voice}:" keeps all keys in one Redis
	// Cluster slot.
	KeyPrefix string `koanf:"key_prefix"`
	// PoolSize is the client's connection pool size; 0 (the default) keeps
	// go-redis's default of 10 per CPU.
	PoolSize int `koanf:"pool_size"`
	// DialTimeout bounds connecting. Default 2s.
	DialTimeout time.Duration `koanf:"dial_timeout"`
	// ReadTimeout bounds one reply; an allocation is one script call, so
	// this is its worst case. Default 500ms.
	ReadTimeout time.Duration `koanf:"read_timeout"`
	// WriteTimeout bounds sending one command. Default 500ms.
	WriteTimeout time.Duration `koanf:"write_timeout"`
}

func defaultRedis() Redis {
	return Redis{
		KeyPrefix:    "voice:",
		DialTimeout:  2 * time.Second,
		ReadTimeout:  500 * time.Millisecond,
		WriteTimeout: 500 * time.Millisecond,
	}
}

// Embedded reports whether edge should run its in-process Redis.
func (r Redis) Embedded() bool { return r.URL == "" }

// Validate checks the URL parses as go-redis will parse it, without ever
// echoing a password.
func (r Redis) Validate() error {
	var errs []error
	if r.URL != "" {
		errs = append(errs, validateRedisURL(r.URL))
	}
	if r.KeyPrefix == "" {
		errs = append(errs, errors.New(`redis.key_prefix: must not be empty (the predecessor's is "voice:")`))
	}
	if r.PoolSize < 0 {
		errs = append(errs, invalid("redis.pool_size", r.PoolSize, "must be >= 0 (0: go-redis default)"))
	}
	errs = append(errs,
		positive("redis.dial_timeout", r.DialTimeout),
		positive("redis.read_timeout", r.ReadTimeout),
		positive("redis.write_timeout", r.WriteTimeout),
	)
	return errors.Join(errs...)
}

func validateRedisURL(s string) error {
	const path = "redis.url"
	u, err := url.Parse(s)
	if err != nil {
		// url.Error repeats the whole URL, password included.
		shown := s
		if strings.Contains(s, "@") {
			shown = "[redacted]"
		}
		return fmt.Errorf("%s: %q: not a URL", path, shown)
	}
	if _, err := redis.ParseURL(s); err != nil {
		return fmt.Errorf("%s: %q: %s", path, u.Redacted(), strings.TrimPrefix(err.Error(), "redis: "))
	}
	return nil
}
