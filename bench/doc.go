// Package bench holds edge's end-to-end benchmarks: real edge processes,
// real Redis, real sockets, with the alternative measured in the same run.
// Results, commands and the machine are in docs/benchmarks.md.
package bench
