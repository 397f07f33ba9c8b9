// Package plugins is the provider plugin contract: what a telephony
// provider plugin implements and how edge talks to it.
//
// A provider plugin is a separate process that edge starts and speaks to over
// gRPC with github.com/hashicorp/go-plugin. It owns everything specific to
// one provider on the control path (verify the webhook, parse it, render the
// answer); edge owns allocation. Media frames never cross this boundary.
//
// This package holds, in one place:
//
//   - Provider: the Go interface a plugin implements, ctx first on every
//     method, and its plain Go types (Request, WebhookResult, Answer, ...);
//   - the go-plugin handshake (Handshake, ProtocolVersion) and plugin set;
//   - the two gRPC adapters (server side in the plugin, client side in edge)
//     over the generated code of proto/provider.proto;
//   - Serve(impl), a plugin's whole main, and Client, the host-side opener;
//   - SDK helpers for authors: form parsing, constant-time comparison,
//     answer templates, XML and JSON answers built with encoders.
//
// The conformance suite lives in package plugintest so that plugin binaries
// do not link the testing package. docs/plugins.md is the author's guide.
package plugins
