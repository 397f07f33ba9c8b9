package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// listener is one HTTP listener as a component: Run serves until ctx ends,
// then stops accepting and waits for requests in flight (up to grace).
// Hijacked connections (media sockets) are not its business: the media
// proxy tracks and drains its own.
type listener struct {
	name  string
	ln    net.Listener
	srv   *http.Server
	grace func() time.Duration
	log   *slog.Logger
}

func newListener(name, addr string, h http.Handler, readHeader time.Duration, grace func() time.Duration, log *slog.Logger) (*listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &listener{
		name: name, ln: ln, grace: grace, log: log,
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: readHeader,
			MaxHeaderBytes:    32 << 10,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		},
	}, nil
}

// Addr is the bound address (useful when the port was 0).
func (l *listener) Addr() string { return l.ln.Addr().String() }

func (l *listener) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- l.srv.Serve(l.ln) }()
	l.log.Info("listening", "listener", l.name, "addr", l.Addr())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), l.grace())
	defer cancel()
	if err := l.srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	l.srv.Close()
	<-errc
	return nil
}
