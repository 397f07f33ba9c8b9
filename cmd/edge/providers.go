package main

import "context"

// setupProviders wires the provider plugins' webhook routes.
//
// TODO(provider plugins issue): the plugin host; the foundation serves the
// generic /api/v1/allocate only.
func setupProviders(ctx context.Context, a *app) error { return nil }
