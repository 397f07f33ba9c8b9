// Package nodee2e runs deploy/ on a real single-node Kubernetes on this
// machine, with calls on the line: etcd, kube-apiserver, kube-controller-
// manager, kube-scheduler, containerd (runc, the CNI bridge), kubelet,
// kube-proxy (iptables) and CoreDNS, each started by the test and stopped
// by PID, inside a network namespace the test creates, so that no packet
// to a pod or Service address leaves it. It applies deploy/ through a test
// overlay (./overlay: the images built here, two edge replicas, a small
// StatefulSet of fake voice agents with the preStop drain), places calls
// through the edge Service as a provider would (signed Twilio webhooks,
// media sockets that check their echoes), and rolls edge and the agents,
// deletes an agent holding a call (one that ends with it, one of the
// merchant opted in to proxy.resume that moves to another agent) and the
// leading edge pod, and moves edge to the uring overlay, judging each from
// what the provider-side clients and the agents saw.
//
// `make node-e2e` installs what it needs (node-deps), builds the images and
// the Kubernetes binaries (cached, test/node-e2e/build.sh) and runs it
// (test/node-e2e/run.sh). It needs root; it skips when the kernel refuses a
// network namespace, and when run by a bare `go test` without the
// binaries (EDGE_NODE_E2E_BIN) and images (EDGE_NODE_E2E_IMAGES).
package nodee2e
