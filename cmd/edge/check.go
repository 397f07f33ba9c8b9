package main

import (
	"context"
	"fmt"
	"io"

	"github.com/edge-voice/edge/config"
)

// checkConfig validates the configuration (file, environment and flags, as
// serve would load them) without starting anything.
func checkConfig(_ context.Context, args, environ []string, stdout, _ io.Writer) error {
	cfg, err := config.Load(args, environ)
	if err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	fmt.Fprintf(stdout, "configuration is valid\n%s\n", cfg.String())
	return nil
}
