package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// server is one redis-server this tool started (or was pointed at).
type server struct {
	addr string
	cmd  *exec.Cmd // nil: not ours
	dir  string
	info *redis.Client // INFO reads, outside the measured clients
}

// startServer starts a redis-server on a free loopback port, persistence
// off as edge's tests run it; extra are more arguments (cluster mode).
func startServer(extra ...string) (*server, error) {
	dir, err := os.MkdirTemp("", "edge-ceiling-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--logfile", filepath.Join(dir, "redis.log")}
	args = append(args, extra...)
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	s := &server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, dir: dir}
	s.info = redis.NewClient(&redis.Options{Addr: s.addr})
	deadline := time.Now().Add(20 * time.Second)
	for s.info.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("redis-server on %s not answering after 20s (log in %s)", s.addr, dir)
		}
		time.Sleep(50 * time.Millisecond) // polling a process that gives no other signal
	}
	return s, nil
}

func attach(addr string) *server {
	return &server{addr: addr, info: redis.NewClient(&redis.Options{Addr: addr})}
}

func (s *server) stop() {
	s.info.Close()
	if s.cmd != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		os.RemoveAll(s.dir)
	}
}

// startCluster starts n cluster-enabled masters and joins them with the
// slots split evenly, as internal/testredis.StartCluster does for the tests.
func startCluster(n int) ([]*server, error) {
	var nodes []*server
	var addrs []string
	for range n {
		bus, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := startServer("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000", "--cluster-port", strconv.Itoa(bus))
		if err != nil {
			stopAll(nodes)
			return nil, err
		}
		nodes = append(nodes, s)
		addrs = append(addrs, s.addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		stopAll(nodes)
		return nil, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range nodes {
		for {
			info, err := s.info.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				stopAll(nodes)
				return nil, fmt.Errorf("cluster_state not ok on %s after 30s", s.addr)
			}
			time.Sleep(100 * time.Millisecond) // as above
		}
	}
	return nodes, nil
}

func stopAll(nodes []*server) {
	for _, s := range nodes {
		s.stop()
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// snapshot is what one node's INFO says at one moment.
type snapshot struct {
	at       time.Time
	cpu      float64 // used_cpu_user + used_cpu_sys, seconds
	sys      float64 // used_cpu_sys
	commands map[string]cmdStat
	keys     int64
	memory   int64
}

type cmdStat struct {
	calls int64
	usec  int64
}

func (s *server) snapshot(ctx context.Context) (snapshot, error) {
	text, err := s.info.Info(ctx, "cpu", "commandstats", "keyspace", "memory").Result()
	if err != nil {
		return snapshot{}, fmt.Errorf("INFO on %s: %w", s.addr, err)
	}
	snap := snapshot{at: time.Now(), commands: map[string]cmdStat{}}
	for _, line := range strings.Split(text, "\n") {
		name, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch {
		case name == "used_cpu_user" || name == "used_cpu_sys":
			f, _ := strconv.ParseFloat(val, 64)
			snap.cpu += f
			if name == "used_cpu_sys" {
				snap.sys = f
			}
		case name == "used_memory":
			snap.memory, _ = strconv.ParseInt(val, 10, 64)
		case strings.HasPrefix(name, "db"):
			k, _, _ := strings.Cut(strings.TrimPrefix(val, "keys="), ",")
			n, _ := strconv.ParseInt(k, 10, 64)
			snap.keys += n
		case strings.HasPrefix(name, "cmdstat_") && name != "cmdstat_info":
			var st cmdStat
			for _, f := range strings.Split(val, ",") {
				k, v, _ := strings.Cut(f, "=")
				switch k {
				case "calls":
					st.calls, _ = strconv.ParseInt(v, 10, 64)
				case "usec":
					st.usec, _ = strconv.ParseInt(v, 10, 64)
				}
			}
			snap.commands[strings.TrimPrefix(name, "cmdstat_")] = st
		}
	}
	return snap, nil
}

// delta is what a node did between two snapshots.
type delta struct {
	seconds  float64
	cpu      float64 // CPU seconds
	sys      float64 // of which in the kernel
	commands map[string]cmdStat
}

func diff(a, b snapshot) delta {
	d := delta{seconds: b.at.Sub(a.at).Seconds(), cpu: b.cpu - a.cpu, sys: b.sys - a.sys, commands: map[string]cmdStat{}}
	for name, st := range b.commands {
		p := a.commands[name]
		if st.calls-p.calls > 0 {
			d.commands[name] = cmdStat{calls: st.calls - p.calls, usec: st.usec - p.usec}
		}
	}
	return d
}

// share is the node's CPU as a share of one core.
func (d delta) share() float64 {
	if d.seconds <= 0 {
		return 0
	}
	return d.cpu / d.seconds
}

// total is every command the node ran, those the scripts ran included
// (INFO commandstats counts a script's commands under their own names).
func (d delta) total() int64 {
	var n int64
	for _, st := range d.commands {
		n += st.calls
	}
	return n
}
