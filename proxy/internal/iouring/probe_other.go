//go:build !linux

package iouring

import "errors"

// Probe reports why this process cannot run an io_uring relay loop.
func Probe() error { return errors.New("io_uring: Linux only") }
