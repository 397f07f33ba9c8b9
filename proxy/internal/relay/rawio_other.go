//go:build !linux

package relay

import "syscall"

func RawRead(fd int, b []byte) (int, syscall.Errno) {
	n, err := syscall.Read(fd, b)
	if err != nil {
		return 0, err.(syscall.Errno)
	}
	return n, 0
}

func RawWrite(fd int, b []byte) (int, syscall.Errno) {
	n, err := syscall.Write(fd, b)
	if err != nil {
		return 0, err.(syscall.Errno)
	}
	return n, 0
}
