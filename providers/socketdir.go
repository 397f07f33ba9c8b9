package providers

import (
	"fmt"
	"os"

	"github.com/hashicorp/go-plugin"
)

// checkSocketDir fails when the plugins could not create their sockets.
// go-plugin's plugin side makes its Unix socket in the directory it
// inherits from edge: PLUGIN_UNIX_SOCKET_DIR when set, else the temporary
// directory (TMPDIR, else /tmp). In a container with a read-only root
// filesystem and nothing writable mounted there, every plugin dies on
// start and is restarted forever, and the log names only a file under
// /tmp; edge says what to fix, at start, instead.
func checkSocketDir() error {
	dir := os.Getenv(plugin.EnvUnixSocketDir)
	if dir == "" {
		dir = os.TempDir()
	}
	f, err := os.CreateTemp(dir, "edge-plugin-probe")
	if err != nil {
		return fmt.Errorf("provider plugins need a writable directory for their sockets, and %s is not one (%w): mount a writable volume there (deploy/base mounts an emptyDir at /tmp) or point TMPDIR (or %s) at one", dir, err, plugin.EnvUnixSocketDir)
	}
	name := f.Name()
	f.Close()
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("provider plugins' socket directory %s: %w", dir, err)
	}
	return nil
}
