// Package providers is the host side of provider plugins in edge: it runs
// each configured provider as a go-plugin process (restarted with backoff
// when it crashes or stops answering), and serves the providers' webhook
// routes by asking the plugin to verify and parse a request, allocating
// through calls.Service, and having the plugin render the answer.
//
// The webhook path costs one plugin RPC when the plugin returns an answer
// template (all built-ins do), two otherwise or on a failure. While a
// plugin is down its webhooks get a 503 produced here; edge itself never
// goes down with a plugin.
package providers
