// Package api is edge's HTTP surface: the generic allocation endpoint on the
// public listener; the predecessor-compatible release, drain, status and
// pod endpoints, health, readiness and metrics on the admin listener, behind
// its token, and on the cluster-internal listener (internal.go), where the
// predecessor's clients call them without credentials. The
// whole surface is listed in routes.go; errors become HTTP statuses in one
// place, errors.go.
package api
