// Package balancer is a TCP load balancer for end-to-end tests that
// honours readiness the way a Kubernetes Service does: it probes each
// backend's readiness URL, hands every new connection to the next ready
// backend (round robin), and leaves established connections alone when a
// backend turns unready. A connection that arrives while no backend is
// ready is reset, as kube-proxy rejects traffic to a Service without
// endpoints. Tests put it in front of edge replicas so that a provider
// client sees what a real deployment's callers would.
package balancer
