// Command edge routes telephony calls to voice-agent pods: provider webhooks
// in, a pod allocated per call out of Redis pools, the call's media
// WebSocket proxied to the pod, the pod given back when the socket closes.
//
//	edge [flags]                  serve (see --help)
//	edge check-config --config f  validate a config file and exit
//	edge version
//
// Components (listeners, leader loops, plugin hosts, the media proxy) each
// block in Run(ctx) and are composed here with an errgroup.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	switch {
	case err == nil, errors.Is(err, pflag.ErrHelp): // help was asked for and printed
	default:
		fmt.Fprintln(os.Stderr, "edge:", err)
		os.Exit(1)
	}
}

// subcommands are edge's other entry points, by first argument. Each
// feature adds its own (see the files of this package).
var subcommands = map[string]func(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error{
	"check-config": checkConfig,
	"version": func(_ context.Context, _, _ []string, stdout, _ io.Writer) error {
		fmt.Fprintln(stdout, "edge", version)
		return nil
	},
}

// run is main without the process: tests call it with their own args,
// environment and context.
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		if cmd, ok := subcommands[args[0]]; ok {
			return cmd(ctx, args[1:], environ, stdout, stderr)
		}
	}
	return serve(ctx, args, environ, stderr)
}
