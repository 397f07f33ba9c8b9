package main

import "context"

// setupMedia wires the /ws/pod/ media proxy.
//
// TODO(media path issue): the proxy; the foundation serves no media yet.
func setupMedia(ctx context.Context, a *app) error { return nil }
