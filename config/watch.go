package config

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"sync/atomic"
	"time"
)

// Watcher reloads the config file while edge runs. It polls rather than
// using fsnotify because Kubernetes updates a mounted ConfigMap by swapping a
// symlink to a new directory, which file watches miss; polling reads through
// the symlink and compares content hashes.
//
// A changed file is loaded again with the original flags and environment.
// An invalid result is logged, counted and reported to OnReject, and the
// last good config stays. A valid one keeps the running values of
// restart-only fields (reported to OnRestartRequired), becomes Current, and
// goes to OnChange. Set the callbacks before Run; they run on Run's
// goroutine, one at a time, and should not block long; nil ones are skipped.
type Watcher struct {
	// OnChange receives the previous and the new Current config after a
	// valid change that the running edge can apply.
	OnChange func(old, new *Config)
	// OnReject receives why a changed file was not applied (it did not read,
	// parse or validate).
	OnReject func(err error)
	// OnRestartRequired receives the keys of restart-only fields whose new
	// values were not applied.
	OnRestartRequired func(keys []string)

	log     *slog.Logger
	flags   *flags
	environ []string
	current atomic.Pointer[Config]
	reloads atomic.Uint64
	rejects atomic.Uint64

	// Owned by Run's goroutine.
	sum     [sha256.Size]byte
	haveSum bool
	readErr string
	warned  []string // Warnings last logged
}

// NewWatcher returns a Watcher whose Current is initial, reloading with the
// args and environ that Load built initial from. log may be nil.
func NewWatcher(initial *Config, args, environ []string, log *slog.Logger) (*Watcher, error) {
	if initial == nil {
		return nil, errors.New("config watcher: no initial config")
	}
	fl, err := parseFlags(args)
	if err != nil {
		return nil, fmt.Errorf("config watcher: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{log: log, flags: fl, environ: environ}
	w.current.Store(initial)
	return w, nil
}

// Current is the config in force. Do not modify it.
func (w *Watcher) Current() *Config { return w.current.Load() }

// Reloads counts applied changes.
func (w *Watcher) Reloads() uint64 { return w.reloads.Load() }

// Rejects counts changes not applied because they were invalid.
func (w *Watcher) Rejects() uint64 { return w.rejects.Load() }

// Run polls the file every Reload.Interval until ctx ends, then returns nil.
// Without --config there is nothing to watch and it only waits. It logs
// the config's Warnings at start, and again when they change (a reload, a
// file's mode changed).
func (w *Watcher) Run(ctx context.Context) error {
	w.warn()
	if w.flags.path == "" {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(w.Current().Reload.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			w.poll()
			w.warn()
		}
	}
}

// warn logs each of Warnings not logged the last time: once, not on every
// poll, and again after it was fixed and came back.
func (w *Watcher) warn() {
	now := Warnings(w.Current(), w.flags.path)
	for _, s := range now {
		if !slices.Contains(w.warned, s) {
			w.log.Warn(s)
		}
	}
	w.warned = now
}

// poll reads the file and applies it if its content changed. The first poll
// always loads: the file may have changed since the initial Load, and an
// unchanged file yields an equal config, which is not a change.
func (w *Watcher) poll() {
	data, err := os.ReadFile(w.flags.path)
	if err != nil {
		// A missing file is reported once, not on every tick.
		if msg := err.Error(); msg != w.readErr {
			w.readErr = msg
			w.reject(fmt.Errorf("read config file: %w", err))
		}
		return
	}
	w.readErr = ""
	sum := sha256.Sum256(data)
	if w.haveSum && sum == w.sum {
		return
	}
	w.sum, w.haveSum = sum, true
	w.apply(data)
}

func (w *Watcher) apply(data []byte) {
	next, err := load(w.flags, w.environ, data)
	if err != nil {
		w.reject(err)
		return
	}
	cur := w.Current()
	if keys := RestartChanges(cur, next); len(keys) > 0 {
		w.log.Warn("config change requires restart, not applied", "file", w.flags.path, "keys", keys)
		keepRestartFields(cur, next)
		next.link()
		if err := next.Validate(); err != nil {
			// Restart-only values mixed with new runtime ones; no known
			// constraint spans both, but never publish an invalid config.
			w.reject(fmt.Errorf("with running values of %v: %w", keys, err))
			return
		}
		if w.OnRestartRequired != nil {
			w.OnRestartRequired(keys)
		}
	}
	if reflect.DeepEqual(cur, next) {
		return
	}
	changed := changedKeys(cur, next)
	w.current.Store(next)
	w.reloads.Add(1)
	w.log.Info("config reloaded", "file", w.flags.path, "changed", changed)
	if w.OnChange != nil {
		w.OnChange(cur, next)
	}
}

func (w *Watcher) reject(err error) {
	w.rejects.Add(1)
	w.log.Error("config change rejected, keeping the last good config", "file", w.flags.path, "err", err)
	if w.OnReject != nil {
		w.OnReject(err)
	}
}
