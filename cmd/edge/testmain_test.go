package main

import (
	"os"
	"testing"

	"github.com/edge-voice/edge/internal/seccomptest"
)

func TestMain(m *testing.M) {
	// This test binary doubles as the launcher that starts edge under a
	// seccomp profile (seccomp_e2e_test.go); it never returns then.
	seccomptest.Launch()
	os.Exit(m.Run())
}
