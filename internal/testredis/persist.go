package testredis

import (
	"os"
	"path/filepath"
)

// AOF makes the server write every change to its append-only file before
// answering (appendfsync always), so that Restart, a kill -9 and a start,
// brings its data back as a persisted Redis recovers from a crash.
func AOF() Option {
	return Args("--appendonly", "yes", "--appendfsync", "always")
}

// RestartEmpty kills the server, deletes whatever it persisted and starts
// it again on the same address: a Redis back without its data, whether or
// not it ran with AOF.
func (s *Server) RestartEmpty() {
	s.tb.Helper()
	s.Kill()
	for _, name := range []string{"appendonlydir", "appendonly.aof", "dump.rdb"} {
		os.RemoveAll(filepath.Join(s.dir, name))
	}
	os.Remove(s.sock)
	s.start()
}
