package seccomptest

import (
	"strings"
	"testing"
)

func profileOf(arch string, names ...string) Profile {
	p := Profile{DefaultAction: "SCMP_ACT_ERRNO", Architectures: []string{arch}}
	p.Syscalls = append(p.Syscalls, struct {
		Names  []string `json:"names"`
		Action string   `json:"action"`
	}{names, "SCMP_ACT_ALLOW"})
	return p
}

// The filter's shape: the arch check, a test and a return per name
// (denied ones first, so a name both allowed and denied is denied), and
// the trap at the end; a name without a number or a profile without
// x86-64 is an error, never a filter that silently allows less or more.
func TestFilter(t *testing.T) {
	prog, err := filter(profileOf("SCMP_ARCH_X86_64", "read", "write", "io_uring_setup"), []string{"io_uring_setup"})
	if err != nil {
		t.Fatal(err)
	}
	if want := 4 + 2*3 + 1; len(prog) != want {
		t.Fatalf("%d instructions, want %d", len(prog), want)
	}
	if prog[4].K != uint32(numbers["io_uring_setup"]) || prog[5].K&0xffff0000 != 0x50000 {
		t.Errorf("io_uring_setup is not denied first: %+v %+v", prog[4], prog[5])
	}
	if last := prog[len(prog)-1]; last.K != 0x30000 {
		t.Errorf("the default is %#x, want SECCOMP_RET_TRAP", last.K)
	}
	if _, err := filter(profileOf("SCMP_ARCH_X86_64", "no_such_call"), nil); err == nil || !strings.Contains(err.Error(), "no_such_call") {
		t.Errorf("unknown name: %v", err)
	}
	if _, err := filter(profileOf("SCMP_ARCH_AARCH64", "read"), nil); err == nil {
		t.Error("a profile without x86-64 compiled")
	}
}
