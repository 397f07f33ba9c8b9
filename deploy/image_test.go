package deploy

import (
	"os"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// The Dockerfile builds what the Deployment runs: a static binary (the
// base image has no C library) started as /edge with the Deployment's
// args, as the user the Deployment's securityContext names. No image is
// built here (the test machine has no container daemon).
func TestDockerfileMatchesTheDeployment(t *testing.T) {
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var build, user, entry string
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "RUN CGO_ENABLED=0 go build"):
			build = line
		case strings.HasPrefix(line, "USER "):
			user = strings.TrimPrefix(line, "USER ")
		case strings.HasPrefix(line, "ENTRYPOINT "):
			entry = strings.TrimPrefix(line, "ENTRYPOINT ")
		}
	}
	if !strings.Contains(build, "-o /out/edge ./cmd/edge") {
		t.Errorf("no static build of ./cmd/edge: %q", build)
	}
	if entry != `["/edge"]` {
		t.Errorf("ENTRYPOINT %s, want [\"/edge\"]", entry)
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
}
