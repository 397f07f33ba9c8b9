//go:build !(linux && amd64)

package seccomptest

import "errors"

// Supported says whether this platform can run programs under a profile.
const Supported = false

func execUnder(Profile, []string, string, []string, []string) error {
	return errors.New("seccomptest runs on linux/amd64 only")
}
