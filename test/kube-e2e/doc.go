// Package kubee2e is edge's test tier against a real kube-apiserver and etcd
// on loopback: the pod informer with its label selector, pod
// add/ready/delete, RBAC from deploy/, and leader failover between two edge
// processes. The tests skip unless EDGE_KUBE_APISERVER names a kube-apiserver
// binary; build it with ./build-apiserver.sh (cached under
// $HOME/.cache/edge-kube-e2e) or run `make kube-e2e`.
package kubee2e
