package runtimee2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// podName is metadata.name as the downward API gives it to the container.
const podName = "edge-7d9c5b6f4-runtime"

// What of the pod this file gives the runtime; a field deploy/ sets that
// is not listed fails the test rather than being silently left out, so
// that "as deploy/ has it" stays true when deploy/ grows.
var (
	podFields = []string{"serviceAccountName", // the API token: no API server here
		"terminationGracePeriodSeconds", // the stop's deadline
		"securityContext", "topologySpreadConstraints", "containers", "volumes"}
	podSecurityFields       = []string{"seccompProfile", "runAsNonRoot", "runAsUser"}
	containerFields         = []string{"name", "image", "args", "env", "ports", "readinessProbe", "livenessProbe", "resources", "securityContext", "volumeMounts"}
	containerSecurityFields = []string{"runAsNonRoot", "runAsUser", "allowPrivilegeEscalation", "readOnlyRootFilesystem", "capabilities", "seccompProfile"}
)

// unhandled lists the JSON fields of v outside known.
func unhandled(t *testing.T, v any, known []string) []string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	var out []string
	for k := range m {
		if !slices.Contains(known, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// container is edge's container as podman runs it.
type container struct {
	// args are podman run's flags, the image and the container's args.
	args []string
	// seccomp is the profile's file, "" for the runtime's default.
	seccomp string
	uid     int64
	grace   int64 // terminationGracePeriodSeconds
	secrets []string
}

// redacted is the command line with the Secrets' values hidden, for the log.
func (c container) redacted() string {
	line := "podman " + strings.Join(c.args, " ")
	for _, s := range c.secrets {
		line = strings.ReplaceAll(line, s, "<secret>")
	}
	return line
}

// podmanRun turns the rendered pod into podman run's flags, as the kubelet
// and a CRI runtime would build the container: the securityContext (the
// container's over the pod's), the volumes at their mounts, the env with
// the downward API and Secrets resolved (secrets: "name/key" -> value), the
// memory limit, the args. extraEnv is the test's environment (listeners,
// Redis, static pods), given after the pod's.
func podmanRun(t *testing.T, r rendered, image string, secrets map[string]string, extraEnv ...string) container {
	t.Helper()
	pod := r.dep.Spec.Template.Spec
	if f := unhandled(t, pod, podFields); len(f) > 0 {
		t.Fatalf("deploy/ sets pod fields this test does not give the runtime: %v", f)
	}
	if len(pod.Containers) != 1 || len(pod.InitContainers) != 0 {
		t.Fatalf("%d containers, %d init containers: this test runs one", len(pod.Containers), len(pod.InitContainers))
	}
	c := pod.Containers[0]
	if f := unhandled(t, c, containerFields); len(f) > 0 {
		t.Fatalf("deploy/ sets container fields this test does not give the runtime: %v", f)
	}
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	sc := c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	if f := unhandled(t, psc, podSecurityFields); len(f) > 0 {
		t.Fatalf("the pod's securityContext sets %v, which this test does not give the runtime", f)
	}
	if f := unhandled(t, sc, containerSecurityFields); len(f) > 0 {
		t.Fatalf("the container's securityContext sets %v, which this test does not give the runtime", f)
	}

	out := container{grace: 30}
	if pod.TerminationGracePeriodSeconds != nil {
		out.grace = *pod.TerminationGracePeriodSeconds
	}
	args := []string{"run", "--runtime", "runc",
		// Host networking: Redis and the fake agents listen on the host's
		// loopback, the only network this machine has.
		"--network", "host",
		// No limit above the host's hard limits: the container has no
		// CAP_SYS_RESOURCE to raise them (podman's defaults exceed them).
		"--ulimit", "nofile=" + hardLimit(t, syscall.RLIMIT_NOFILE, 0),
		"--ulimit", "nproc=" + hardLimit(t, 6 /* RLIMIT_NPROC */, pidMax(t)),
	}

	// securityContext: the container's fields over the pod's.
	uid := sc.RunAsUser
	if uid == nil {
		uid = psc.RunAsUser
	}
	if uid != nil {
		args = append(args, "--user", strconv.FormatInt(*uid, 10))
		out.uid = *uid
	}
	nonRoot := sc.RunAsNonRoot
	if nonRoot == nil {
		nonRoot = psc.RunAsNonRoot
	}
	if nonRoot != nil && *nonRoot && (uid == nil || *uid == 0) {
		// The kubelet would check the image's user; deploy/ names one.
		t.Fatal("runAsNonRoot without a non-zero runAsUser: this test checks the uid deploy/ names")
	}
	if sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
		// podman's --read-only also mounts tmpfs on /tmp, /run and
		// /var/tmp; Kubernetes mounts nothing that the pod does not list.
		args = append(args, "--read-only", "--read-only-tmpfs=false")
	}
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		args = append(args, "--security-opt", "no-new-privileges")
	}
	if sc.Capabilities != nil {
		for _, cp := range sc.Capabilities.Drop {
			args = append(args, "--cap-drop", string(cp))
		}
		for _, cp := range sc.Capabilities.Add {
			args = append(args, "--cap-add", string(cp))
		}
	}
	profile := sc.SeccompProfile
	if profile == nil {
		profile = psc.SeccompProfile
	}
	switch {
	case profile == nil:
		t.Fatal("no seccomp profile: the kubelet would run the pod unconfined")
	case profile.Type == corev1.SeccompProfileTypeRuntimeDefault:
		// podman's default profile, as CRI-O's RuntimeDefault.
	case profile.Type == corev1.SeccompProfileTypeLocalhost && profile.LocalhostProfile != nil:
		out.seccomp = r.localhostProfile(t, *profile.LocalhostProfile)
		args = append(args, "--security-opt", "seccomp="+out.seccomp)
	default:
		t.Fatalf("seccomp profile %+v: this test runs RuntimeDefault and Localhost", profile)
	}

	// Volumes at their mounts.
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 {
			t.Fatalf("mount of an unknown volume %s", m.Name)
		}
		if m.SubPath != "" || m.SubPathExpr != "" || m.MountPropagation != nil {
			t.Fatalf("mount %s: subPath and propagation are not given to the runtime here", m.Name)
		}
		v := pod.Volumes[i]
		switch {
		case v.ConfigMap != nil:
			if v.ConfigMap.Name != r.config.Name {
				t.Fatalf("volume %s: ConfigMap %s, the kustomization renders %s", v.Name, v.ConfigMap.Name, r.config.Name)
			}
			dir := t.TempDir()
			for k, val := range r.config.Data {
				if err := os.WriteFile(filepath.Join(dir, k), []byte(val), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			os.Chmod(dir, 0o755)
			// The kubelet mounts ConfigMaps read-only whatever the mount says.
			args = append(args, "--volume", dir+":"+m.MountPath+":ro")
		case v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory:
			// The kubelet mounts a tmpfs of the size limit, mode 0777, with
			// no nosuid, nodev or noexec, and copies nothing from the image.
			opts := "rw,exec,dev,suid,mode=0777,notmpcopyup"
			if v.EmptyDir.SizeLimit != nil {
				opts += ",size=" + strconv.FormatInt(v.EmptyDir.SizeLimit.Value(), 10)
			}
			if m.ReadOnly {
				t.Fatalf("volume %s mounted read-only", v.Name)
			}
			args = append(args, "--tmpfs", m.MountPath+":"+opts)
		case v.EmptyDir != nil:
			dir := t.TempDir()
			os.Chmod(dir, 0o777)
			mode := ":rw"
			if m.ReadOnly {
				mode = ":ro"
			}
			args = append(args, "--volume", dir+":"+m.MountPath+mode)
		default:
			t.Fatalf("volume %s is of a type this test does not give the runtime", v.Name)
		}
	}

	// The environment, as the kubelet resolves it.
	if len(c.EnvFrom) > 0 {
		t.Fatal("envFrom is not given to the runtime here")
	}
	for _, e := range c.Env {
		val, ok := e.Value, true
		switch f := e.ValueFrom; {
		case f == nil:
		case f.FieldRef != nil && f.FieldRef.FieldPath == "metadata.name":
			val = podName
		case f.ResourceFieldRef != nil:
			q, found := c.Resources.Limits[corev1.ResourceName(strings.TrimPrefix(f.ResourceFieldRef.Resource, "limits."))]
			if !strings.HasPrefix(f.ResourceFieldRef.Resource, "limits.") || !found {
				t.Fatalf("env %s: %s is not a limit the container sets", e.Name, f.ResourceFieldRef.Resource)
			}
			if !f.ResourceFieldRef.Divisor.IsZero() && f.ResourceFieldRef.Divisor.Value() != 1 {
				t.Fatalf("env %s: a divisor", e.Name)
			}
			val = strconv.FormatInt(q.Value(), 10)
		case f.SecretKeyRef != nil:
			val, ok = secrets[f.SecretKeyRef.Name+"/"+f.SecretKeyRef.Key]
			if val != "" {
				out.secrets = append(out.secrets, val)
			}
			if !ok && (f.SecretKeyRef.Optional == nil || !*f.SecretKeyRef.Optional) {
				t.Fatalf("env %s: the test gives no Secret %s key %s, which the pod requires", e.Name, f.SecretKeyRef.Name, f.SecretKeyRef.Key)
			}
		default:
			t.Fatalf("env %s: a source this test does not resolve: %+v", e.Name, f)
		}
		if ok {
			args = append(args, "--env", e.Name+"="+val)
		}
	}
	for _, e := range extraEnv {
		args = append(args, "--env", e)
	}

	// Limits the runtime enforces; requests only place the pod.
	for name, q := range c.Resources.Limits {
		switch name {
		case corev1.ResourceMemory:
			args = append(args, "--memory", strconv.FormatInt(q.Value(), 10))
		case corev1.ResourceCPU:
			args = append(args, "--cpus", q.AsDec().String())
		default:
			t.Fatalf("limit %s is not given to the runtime here", name)
		}
	}
	if len(c.Command) > 0 {
		t.Fatal("the Deployment overrides the image's entrypoint")
	}
	args = append(args, image)
	out.args = append(args, c.Args...)
	return out
}

// hardLimit is the host's hard limit of resource as podman's --ulimit
// value (soft and hard), capped at max when max > 0.
func hardLimit(t *testing.T, resource int, max uint64) string {
	t.Helper()
	var l syscall.Rlimit
	if err := syscall.Getrlimit(resource, &l); err != nil {
		t.Fatal(err)
	}
	v := l.Max
	if max > 0 && v > max {
		v = max
	}
	s := strconv.FormatUint(v, 10)
	return s + ":" + s
}

// pidMax caps the process limit: podman lowers its own to
// kernel.pid_max, and runc, which it starts, can raise nothing above.
func pidMax(t *testing.T) uint64 {
	t.Helper()
	data, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
