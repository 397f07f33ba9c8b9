// Package iouring is the kernel interface of the io_uring relay: a ring
// (submission and completion queues shared with the kernel, entered with
// raw io_uring_enter(2) calls), the SQE shapes a relay submits (receive,
// send, poll, linked), its completions, a provided-buffer ring, and a probe
// of whether this process may use io_uring at all. It holds the package's
// unsafe memory and raw system calls, so that the code parsing what
// clients send holds none; it knows nothing of sockets or WebSockets.
package iouring
