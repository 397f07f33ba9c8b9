package main

import (
	"context"
	"fmt"
	"io"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/plugins/exotel"
	"github.com/edge-voice/edge/plugins/plivo"
	"github.com/edge-voice/edge/plugins/telnyx"
	"github.com/edge-voice/edge/plugins/twilio"
)

// builtinPlugins are the providers `edge plugin <name>` serves.
var builtinPlugins = map[string]func() plugins.Provider{
	"twilio": func() plugins.Provider { return twilio.New() },
	"plivo":  func() plugins.Provider { return plivo.New() },
	"exotel": func() plugins.Provider { return exotel.New() },
	"telnyx": func() plugins.Provider { return telnyx.New() },
}

func init() { subcommands["plugin"] = runPlugin }

// runPlugin is `edge plugin <name>`: edge re-executes itself this way to
// run a built-in provider as a real plugin process. It only works when
// started by edge (go-plugin's handshake).
func runPlugin(_ context.Context, args, _ []string, _, _ io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: edge plugin <twilio|plivo|exotel|telnyx> (started by edge itself)")
	}
	newProvider, ok := builtinPlugins[args[0]]
	if !ok {
		return fmt.Errorf("plugin %q: not a built-in provider (twilio, plivo, exotel, telnyx)", args[0])
	}
	plugins.Serve(newProvider())
	return nil
}
