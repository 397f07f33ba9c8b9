// Package calls owns a call's lifecycle as edge's HTTP faces see it: a
// request normalised and validated, a pod allocated for it, its media URL
// minted, its release, and every failure turned into one typed Failure.
//
// The generic JSON API (package api) and the provider webhooks (package
// providers) are two thin faces over Service; neither imports the other.
// The media proxy reaches the same allocations through allocator.MediaLeases.
package calls
