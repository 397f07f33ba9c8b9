// Package seccomptest runs a program under a seccomp profile of the OCI
// format (what a Kubernetes Localhost profile is), so that a test can
// check that edge works under the profile deploy/ ships. The kernel
// enforces it, as the container runtime would: the profile's allowed
// system calls pass, the ones a test denies fail with EPERM, and any
// other makes the process crash with SIGSYS and a Go stack trace that
// names the caller (the runtime's default action would be EPERM, which
// a program may swallow; a test wants it loud).
//
// That the runtime enforces the profile as deploy/ gives it is shown by
// running the image under runc (test/runtime-e2e, `make runtime-e2e`),
// which also covers what this launcher cannot: the runtime's own steps
// between loading the filter and exec'ing edge, the container's
// confinement, and the image. This package stays for what runc cannot
// show: a call outside the list named loudly with its caller instead of
// an EPERM edge may handle quietly, the sensitivity of a test (one call
// denied on top of the profile must fail it), and edge under the profile
// in `make test` and the kube-e2e tier, on machines with no container
// runtime and no image.
package seccomptest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// Profile is the part of an OCI seccomp profile the shipped ones use.
type Profile struct {
	DefaultAction   string   `json:"defaultAction"`
	DefaultErrnoRet *uint    `json:"defaultErrnoRet,omitempty"`
	Architectures   []string `json:"architectures"`
	Syscalls        []struct {
		Names  []string `json:"names"`
		Action string   `json:"action"`
	} `json:"syscalls"`
}

// Load reads a profile strictly: an unknown field is an error.
func Load(path string) (Profile, error) {
	var p Profile
	f, err := os.Open(path)
	if err != nil {
		return p, err
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// Allowed lists the names the profile allows, sorted.
func (p Profile) Allowed() []string {
	var out []string
	for _, s := range p.Syscalls {
		if s.Action == "SCMP_ACT_ALLOW" {
			out = append(out, s.Names...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

const (
	envExec    = "EDGE_SECCOMPTEST_EXEC"
	envProfile = "EDGE_SECCOMPTEST_PROFILE"
	envDeny    = "EDGE_SECCOMPTEST_DENY"
)

// Env is what a test adds to the environment of its own test binary, run
// as the launcher (see Launch), so that it starts program under profile
// with the names in deny refused (EPERM).
func Env(program, profile string, deny ...string) []string {
	return []string{envExec + "=" + program, envProfile + "=" + profile, envDeny + "=" + strings.Join(deny, ",")}
}

// ShippedProfile is the path of the profile deploy/components/uring ships.
func ShippedProfile() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "deploy", "components", "uring", "edge-uring.json")
}

// Launcher returns what a test runs to start program under the shipped
// profile with deny refused: this test binary (its TestMain calls Launch)
// and the environment to add. It skips the test where the launcher cannot
// run.
func Launcher(tb testing.TB, program string, deny ...string) (launcher string, env []string) {
	tb.Helper()
	if !Supported {
		tb.Skip("the seccomp launcher runs on linux/amd64 only")
	}
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	return self, Env(program, ShippedProfile(), deny...)
}

// Launch is called first thing in TestMain. In a process started with
// Env, it installs the filter and replaces the process with the program
// (its arguments are the process's own, its environment the process's
// without Env's); it never returns then. Otherwise it returns at once.
func Launch() {
	program := os.Getenv(envExec)
	if program == "" {
		return
	}
	err := launch(program)
	fmt.Fprintf(os.Stderr, "seccomptest: %v\n", err)
	os.Exit(127)
}

func launch(program string) error {
	p, err := Load(os.Getenv(envProfile))
	if err != nil {
		return err
	}
	var deny []string
	if d := os.Getenv(envDeny); d != "" {
		deny = strings.Split(d, ",")
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "EDGE_SECCOMPTEST_")
	})
	return execUnder(p, deny, program, os.Args[1:], env)
}
