package seccomptest

import (
	"fmt"
	"runtime"
	"slices"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Supported says whether this platform can run programs under a profile.
const Supported = true

// execUnder installs the filter on every thread of this process and execs
// program: the filter is inherited across execve and by every child.
func execUnder(p Profile, deny []string, program string, args, env []string) error {
	prog, err := filter(p, deny)
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	return syscall.Exec(program, append([]string{program}, args...), env)
}

// filter compiles the profile to classic BPF: x86-64 only (anything else
// is killed), each allowed number returns ALLOW, each denied one EPERM,
// and the rest TRAP (SIGSYS).
func filter(p Profile, deny []string) ([]unix.SockFilter, error) {
	if !slices.Contains(p.Architectures, "SCMP_ARCH_X86_64") {
		return nil, fmt.Errorf("the profile does not cover SCMP_ARCH_X86_64")
	}
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jeq := func(k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: jt, Jf: jf, K: k}
	}
	ret := func(k uint32) unix.SockFilter { return stmt(unix.BPF_RET|unix.BPF_K, k) }
	prog := []unix.SockFilter{
		stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, 4), // seccomp_data.arch
		jeq(unix.AUDIT_ARCH_X86_64, 1, 0),
		ret(unix.SECCOMP_RET_KILL_PROCESS),
		stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, 0), // seccomp_data.nr
	}
	add := func(names []string, action uint32) error {
		for _, name := range names {
			nr, ok := numbers[name]
			if !ok {
				return fmt.Errorf("no x86-64 number for %q: add it to seccomptest's table", name)
			}
			prog = append(prog, jeq(uint32(nr), 0, 1), ret(action))
		}
		return nil
	}
	allowed := slices.DeleteFunc(p.Allowed(), func(n string) bool { return slices.Contains(deny, n) })
	if err := add(deny, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM)); err != nil {
		return nil, err
	}
	if err := add(allowed, unix.SECCOMP_RET_ALLOW); err != nil {
		return nil, err
	}
	return append(prog, ret(unix.SECCOMP_RET_TRAP)), nil
}
