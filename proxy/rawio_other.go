//go:build !linux

package proxy

import "syscall"

func rawRead(fd int, b []byte) (int, syscall.Errno) {
	n, err := syscall.Read(fd, b)
	if err != nil {
		return 0, err.(syscall.Errno)
	}
	return n, 0
}

func rawWrite(fd int, b []byte) (int, syscall.Errno) {
	n, err := syscall.Write(fd, b)
	if err != nil {
		return 0, err.(syscall.Errno)
	}
	return n, 0
}
