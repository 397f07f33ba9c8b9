package nodee2e

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary runs twice: on the host, where TestNode creates the
// network namespace and its work directory and runs the binary again
// inside the namespace (nsenter), and there, where TestNode brings the node
// up and runs the scenarios. Whatever the inner run leaves behind, the
// outer one ends by PID (the processes in the namespace, the containers in
// the node's cgroups), unmounts and removes.
const (
	netnsEnv = "EDGE_NODE_E2E_NETNS"
	workEnv  = "EDGE_NODE_E2E_WORK"
)

func TestNode(t *testing.T) {
	if ns := os.Getenv(netnsEnv); ns != "" {
		runNode(t, os.Getenv(workEnv))
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("node-e2e: skipped: needs root (a network namespace, containerd, kubelet)")
	}
	bin, images := os.Getenv("EDGE_NODE_E2E_BIN"), os.Getenv("EDGE_NODE_E2E_IMAGES")
	if bin == "" || images == "" {
		t.Skip("node-e2e: skipped: EDGE_NODE_E2E_BIN and EDGE_NODE_E2E_IMAGES are not set: run `make node-e2e` (test/node-e2e/run.sh builds and sets them)")
	}
	ns := fmt.Sprintf("edge-node-e2e-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("node-e2e: skipped: the kernel refused a network namespace (ip netns add %s): %v: %s", ns, err, out)
	}
	work, err := os.MkdirTemp("", "edge-node-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { teardown(t, ns, work) })

	args := []string{"--net=/run/netns/" + ns, "--", os.Args[0], "-test.run=" + flag.Lookup("test.run").Value.String(), "-test.v=true", "-test.timeout=0"}
	cmd := exec.Command("nsenter", args...)
	cmd.Env = append(os.Environ(), netnsEnv+"="+ns, workEnv+"="+work)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// Its own process group: a timeout of this test kills it too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Run(); err != nil {
		t.Fatalf("the node run in network namespace %s failed (its output above): %v", ns, err)
	}
}

// teardown ends what the inner run left: every process still in the
// network namespace and every container process in the node's cgroups, by
// PID; then the mounts under work, the namespace and work itself (kept
// when EDGE_NODE_E2E_KEEP is set, for a post-mortem).
func teardown(t *testing.T, ns, work string) {
	for range 3 {
		pids := netnsPIDs(ns)
		pids = append(pids, cgroupPIDs(filepath.Base(work))...)
		if len(pids) == 0 {
			break
		}
		t.Logf("teardown: killing %d processes left by the node: %v", len(pids), pids)
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(time.Second)
	}
	removeCgroups(filepath.Base(work))
	unmountUnder(t, work)
	if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
		t.Logf("teardown: ip netns del %s: %v: %s", ns, err, out)
	}
	if os.Getenv("EDGE_NODE_E2E_KEEP") != "" {
		t.Logf("teardown: kept %s (EDGE_NODE_E2E_KEEP)", work)
		return
	}
	if err := os.RemoveAll(work); err != nil {
		t.Logf("teardown: %v", err)
	}
}

func netnsPIDs(ns string) []int {
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// cgroupRoots are the node's cgroups in each v1 hierarchy: the kubelet's
// cgroupRoot, named after the work directory.
func cgroupRoots(name string) []string {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/" + name)
	return roots
}

func cgroupPIDs(name string) []int {
	var pids []int
	seen := map[int]bool{}
	for _, root := range cgroupRoots(name) {
		filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
					seen[pid] = true
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// removeCgroups removes the node's (empty) cgroups, deepest first.
func removeCgroups(name string) {
	for _, root := range cgroupRoots(name) {
		var dirs []string
		filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			os.Remove(dirs[i])
		}
	}
}

// unmountUnder unmounts (lazily, deepest first) every mount below dir:
// the kubelet's volumes, containerd's rootfs and pod network namespaces.
func unmountUnder(t *testing.T, dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			points = append(points, fields[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		if err := syscall.Unmount(points[i], syscall.MNT_DETACH); err != nil {
			t.Logf("teardown: umount %s: %v", points[i], err)
		}
	}
}
