package testredis

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/internal/testwait"
)

// Args passes more arguments to redis-server (after edge's own).
func Args(args ...string) Option {
	return func(s *Server) { s.extra = append(s.extra, args...) }
}

// StartReplica starts a TCP redis-server replicating primary (a TCP
// server) and waits until its first sync is done.
func StartReplica(tb testing.TB, primary *Server) *Server {
	tb.Helper()
	host, port := "127.0.0.1", strconv.Itoa(primary.port)
	r := Start(tb, TCP(), Args("--replicaof", host, port))
	c := r.Client()
	testwait.Until(tb, 20*time.Second, "replica in sync with "+primary.Addr(), func() bool {
		info, err := c.Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	return r
}

// Sentinels is a set of Redis Sentinel processes watching one master set.
type Sentinels struct {
	Master string
	procs  []*Server
}

// StartSentinels starts n sentinels monitoring primary as master set
// master, with a quorum of n/2+1 and short timeouts (primary considered
// down after 1 s) so that tests see a failover in seconds. It returns once
// every sentinel knows the other sentinels and the replicas, so that a
// failover can be elected at once.
func StartSentinels(tb testing.TB, master string, primary *Server, n, replicas int) *Sentinels {
	tb.Helper()
	set := &Sentinels{Master: master}
	for range n {
		s := &Server{tb: tb, port: freePort(tb)}
		dir, err := os.MkdirTemp("", "edge-sentinel-")
		if err != nil {
			tb.Fatal(err)
		}
		s.dir = dir
		s.sentinel = filepath.Join(dir, "sentinel.conf")
		conf := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d %d\n"+
			"sentinel down-after-milliseconds %[1]s 1000\n"+
			"sentinel failover-timeout %[1]s 5000\n"+
			"sentinel parallel-syncs %[1]s 1\n", master, primary.port, n/2+1)
		if err := os.WriteFile(s.sentinel, []byte(conf), 0o600); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() {
			s.Kill()
			os.RemoveAll(dir)
		})
		s.start()
		set.procs = append(set.procs, s)
	}
	for _, s := range set.procs {
		c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr()})
		testwait.Until(tb, 30*time.Second, "sentinel "+s.Addr()+" sees its peers and replicas", func() bool {
			m, err := c.Master(context.Background(), master).Result()
			return err == nil && m["num-other-sentinels"] == strconv.Itoa(n-1) && m["num-slaves"] == strconv.Itoa(replicas)
		})
		c.Close()
	}
	return set
}

// Addrs are the sentinels' host:port.
func (s *Sentinels) Addrs() []string {
	var out []string
	for _, p := range s.procs {
		out = append(out, p.Addr())
	}
	return out
}

// PrimaryAddr asks a sentinel for the current primary's host:port.
func (s *Sentinels) PrimaryAddr(ctx context.Context) (string, error) {
	c := redis.NewSentinelClient(&redis.Options{Addr: s.procs[0].Addr()})
	defer c.Close()
	hp, err := c.GetMasterAddrByName(ctx, s.Master).Result()
	if err != nil {
		return "", err
	}
	return hp[0] + ":" + hp[1], nil
}

// Cluster is a Redis Cluster of masters only, on loopback.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts n cluster-enabled redis-servers and joins them into
// one cluster with the slots split evenly (redis-cli --cluster create),
// returning when every node reports cluster_state:ok.
func StartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		tb.Fatalf("redis-cli is not installed: run `make deps`")
	}
	cl := &Cluster{}
	var addrs []string
	for range n {
		// The cluster bus gets a port of its own: port+10000 may not exist.
		s := Start(tb, TCP(), Args("--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000",
			"--cluster-port", strconv.Itoa(freePort(tb))))
		cl.Nodes = append(cl.Nodes, s)
		addrs = append(addrs, s.Addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, s := range cl.Nodes {
		c := s.Client()
		testwait.Until(tb, 30*time.Second, "cluster_state:ok on "+s.Addr(), func() bool {
			info, err := c.ClusterInfo(context.Background()).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok")
		})
	}
	return cl
}

// Addrs are the nodes' host:port, the cluster client's seeds.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, s := range c.Nodes {
		out = append(out, s.Addr())
	}
	return out
}

// Client returns a cluster client that the test's cleanup closes.
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	tb.Cleanup(func() { cc.Close() })
	return cc
}
