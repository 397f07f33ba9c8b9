// Package runtimee2e runs edge's image as it ships: the image `make image`
// builds (deploy/image), started by podman under runc with what deploy/
// gives the pod (its securityContext, seccomp profile, volumes, env,
// args and memory limit, read from the manifests and the kustomizations
// that combine them), taking calls through its plugin processes from a
// real Redis and fake voice agents on the host.
//
// The tests skip unless EDGE_RUNTIME_IMAGE names the image; they need root,
// podman and runc. `make runtime-e2e` installs those, builds the image and
// runs them (test/runtime-e2e/run.sh).
package runtimee2e
