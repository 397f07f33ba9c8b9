package allocator

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// A replica that dies (kill -9, a lost node) leaves its media sockets'
// calls holding their pods until their leases run out. Every replica beats
// (Heartbeat) and names its Redis connections after itself (ClientName), so
// the leader can tell a dead replica from a slow one: a replica is dead when
// its heartbeat is older than ReplicaTTL AND Redis holds no connection of
// it. A pause of Redis, or a replica starved of CPU, keeps its connections
// open, so neither ends a live replica's calls.

// ClientName is the Redis client name (CLIENT SETNAME) of a replica's
// connections: what the leader looks for in CLIENT LIST. Bytes Redis does
// not allow in a name (spaces, control bytes) become '_'.
func ClientName(replica string) string {
	b := []byte("edge:" + replica)
	for i, c := range b {
		if c <= ' ' || c > '~' {
			b[i] = '_'
		}
	}
	return string(b)
}

// DeadReplicas is what a dead-replica sweep found and did.
type DeadReplicas struct {
	// Replicas are the replicas found dead (their heartbeats stale and no
	// connection left), forgotten now.
	Replicas []string
	// CallsCut counts the calls whose sockets they held, their leases cut.
	CallsCut int
	// Sweep is the zombie sweep of those calls' pods that followed.
	Sweep SweepResult
}

// SweepDeadReplicas ends the calls of dead replicas: those whose heartbeat
// is older than ReplicaTTL and that hold no connection to Redis. Their
// calls' leases are cut (orphans.lua) and their pods swept at once
// (SweepPods), so the pods are back in their pools within ReplicaTTL plus
// one check of a kill -9, instead of the lease TTL plus a sweep interval.
// A Redis error concludes nothing; fence as for SyncPods.
func (a *Allocator) SweepDeadReplicas(ctx context.Context, fence string) (DeadReplicas, error) {
	ttl := a.current.Load().cfg.ReplicaTTL
	now, err := a.rdb.Time(ctx).Result()
	if err != nil {
		return DeadReplicas{}, fmt.Errorf("dead replicas: redis time: %w", unavailable(err))
	}
	stale, err := a.rdb.ZRangeByScore(ctx, a.keys.Replicas(), &redis.ZRangeBy{
		Min: "-inf", Max: "(" + strconv.FormatInt(now.Add(-ttl).UnixMilli(), 10),
	}).Result()
	if err != nil {
		return DeadReplicas{}, fmt.Errorf("dead replicas: %w", unavailable(err))
	}
	return a.EndDeadReplicas(ctx, fence, stale)
}

// EndDeadReplicas is SweepDeadReplicas from its second step, for a caller
// that knows the stale replicas already (a Heartbeat's Beat.Stale): those
// of them that hold no connection to Redis are dead and their calls end.
// No stale replica, no round trip.
func (a *Allocator) EndDeadReplicas(ctx context.Context, fence string, stale []string) (DeadReplicas, error) {
	if len(stale) == 0 {
		return DeadReplicas{}, nil
	}
	connected, err := a.connectedClients(ctx)
	if err != nil {
		return DeadReplicas{}, fmt.Errorf("dead replicas: client list: %w", unavailable(err))
	}
	args := []any{fence, a.current.Load().cfg.ReplicaTTL.Milliseconds()}
	for _, name := range stale {
		if !connected[ClientName(name)] {
			args = append(args, name)
		}
	}
	if len(args) == 2 {
		return DeadReplicas{}, nil
	}
	r, err := a.run(ctx, "orphans", []string{a.keys.Replicas()}, args...)
	if err != nil {
		return DeadReplicas{}, fmt.Errorf("dead replicas: %w", err)
	}
	rep := reply(r)
	if rep.str(0) == "fenced" {
		return DeadReplicas{}, fmt.Errorf("dead replicas: %w", ErrFenced)
	}
	var res DeadReplicas
	res.CallsCut = int(rep.int(2))
	rest := rep.strs(3)
	var pods []string
	for i, s := range rest {
		if s == "|" {
			res.Replicas = rest[i+1:]
			break
		}
		pods = append(pods, s)
	}
	if len(pods) == 0 {
		return res, nil
	}
	res.Sweep, err = a.SweepPods(ctx, fence, pods)
	return res, err
}

// Leave takes a replica that stops gracefully out of the replicas its
// peers watch, once its media sockets are drained: a stop is no death, and
// a replica left there is found dead (a warning, edge_replicas_dead_total)
// within the replica TTL of every rolling update. It leaves only when no
// call of it is pending (a socket it still holds, an answer whose socket
// has not come); then it returns pending > 0 and stays, for the peers'
// dead-replica check to settle those calls as before.
func (a *Allocator) Leave(ctx context.Context, replica string) (pending int, err error) {
	r, err := a.run(ctx, "leave", []string{a.keys.Replicas()}, replica)
	if err != nil {
		return 0, fmt.Errorf("leave %s: %w", replica, err)
	}
	rep := reply(r)
	return int(rep.int(1)), nil
}

// connectedClients is the set of client names Redis holds connections of,
// asked of the node that holds edge's keys.
func (a *Allocator) connectedClients(ctx context.Context) (map[string]bool, error) {
	var list string
	var err error
	if cc, ok := a.rdb.(*redis.ClusterClient); ok {
		node, nerr := cc.MasterForKey(ctx, a.keys.Replicas())
		if nerr != nil {
			return nil, nerr
		}
		list, err = node.ClientList(ctx).Result()
	} else {
		list, err = a.rdb.ClientList(ctx).Result()
	}
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, line := range strings.Split(list, "\n") {
		for _, field := range strings.Fields(line) {
			if name, ok := strings.CutPrefix(field, "name="); ok && name != "" {
				names[name] = true
			}
		}
	}
	return names, nil
}
