// Package allocator owns edge's Redis data model: the key schema (keys.go,
// the only place a key name is built), and one Lua script per state change
// (lua/*.lua): allocate, release, renew, drain, register and unregister a
// pod. Each runs in one round trip with EVALSHA, atomically, so no state
// change needs a rollback path.
//
// The data model is the predecessor's (the "seeds"), so a predecessor
// deployment switches to edge by pointing it at the same Redis; what edge
// adds (per-call leases on shared pods, pool types in call info, the list of
// merchant pools) is new keys and fields, never a new meaning for an old one.
//
// The package imports nothing else of edge.
package allocator
