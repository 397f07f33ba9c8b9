package deploy

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// instructions are a Dockerfile's instructions (comments and blank lines
// dropped), split into stages at each FROM.
func instructions(t *testing.T, path string) [][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var stages [][]string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "FROM ") || len(stages) == 0 {
			stages = append(stages, nil)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], line)
	}
	return stages
}

// The Dockerfile builds what the Deployment runs, and `make image` builds
// the same image with no network: both run deploy/image/rootfs.sh (the
// static binary at /edge, CA certificates, the user's passwd entry, /tmp)
// and copy its result onto an empty base in one runtime stage, the same
// in both files but for where the filesystem is copied from. The image
// starts /edge with the Deployment's args, as the user the Deployment's
// securityContext names, whose passwd entry gives its group.
// test/runtime-e2e runs the image `make image` builds.
func TestDockerfileMatchesTheDeployment(t *testing.T) {
	docker := instructions(t, "../Dockerfile")
	offline := instructions(t, "image/Containerfile")
	if len(docker) < 2 || len(offline) != 1 {
		t.Fatalf("want a build stage and a runtime stage in the Dockerfile (%d stages) and one stage in image/Containerfile (%d)", len(docker), len(offline))
	}
	if !slices.ContainsFunc(docker[0], func(s string) bool {
		return strings.HasPrefix(s, "RUN ") && strings.Contains(s, "deploy/image/rootfs.sh /out/rootfs")
	}) {
		t.Errorf("the Dockerfile's build stage does not run deploy/image/rootfs.sh /out/rootfs: %q", docker[0])
	}
	runtime := docker[len(docker)-1]
	normalise := func(stage []string, from string) []string {
		out := slices.Clone(stage)
		for i, s := range out {
			if rest, ok := strings.CutPrefix(s, "COPY "+from+" "); ok {
				out[i] = "COPY <rootfs> " + rest
			}
		}
		return out
	}
	d, o := normalise(runtime, "--from=build /out/rootfs/"), normalise(offline[0], "rootfs/")
	if !slices.Equal(d, o) {
		t.Errorf("the runtime stages differ:\nDockerfile:          %q\nimage/Containerfile: %q", d, o)
	}
	if runtime[0] != "FROM scratch" || !slices.Contains(d, "COPY <rootfs> /") {
		t.Errorf("the runtime stage is not the rootfs on an empty base: %q", runtime)
	}
	var user, entry string
	for _, s := range runtime {
		if u, ok := strings.CutPrefix(s, "USER "); ok {
			user = u
		}
		if e, ok := strings.CutPrefix(s, "ENTRYPOINT "); ok {
			entry = e
		}
	}
	if entry != `["/edge"]` {
		t.Errorf("ENTRYPOINT %s, want [\"/edge\"]", entry)
	}

	script, err := os.ReadFile("image/rootfs.sh")
	if err != nil {
		t.Fatal(err)
	}
	build := regexp.MustCompile(`(?m)^CGO_ENABLED=0 go build .*-o "\$root/edge" \./cmd/edge$`)
	if !build.Match(script) {
		t.Error("image/rootfs.sh has no static build of ./cmd/edge to /edge")
	}

	dep := objects(t)["Deployment/edge"].(*appsv1.Deployment)
	c := dep.Spec.Template.Spec.Containers[0]
	if len(c.Command) != 0 {
		t.Errorf("the Deployment overrides the entrypoint: %v", c.Command)
	}
	uid := strconv.FormatInt(*c.SecurityContext.RunAsUser, 10)
	if user != uid+":"+uid {
		t.Errorf("the image runs as %q, the Deployment as %s", user, uid)
	}
	// Without runAsGroup the runtime takes the group from the image's
	// passwd; without an entry, gid 0.
	if !strings.Contains(string(script), ":x:"+uid+":"+uid+":") {
		t.Errorf("image/rootfs.sh writes no passwd entry for uid %s with gid %s", uid, uid)
	}

	recipe, err := os.ReadFile("image/build.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"deploy/image/rootfs.sh", "--network=none", "--pull=never", "-f deploy/image/Containerfile"} {
		if !strings.Contains(string(recipe), want) {
			t.Errorf("image/build.sh does not say %s", want)
		}
	}
}
