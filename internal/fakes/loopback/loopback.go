// Package loopback serves a fake backend's http.Handler on a local address,
// in the background, until it is closed: the start/stop lifecycle every fake
// in internal/fakes shares.
package loopback

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Server runs one handler at a time. The zero value is ready to use; it is
// safe for concurrent use.
type Server struct {
	mu     sync.Mutex
	http   *http.Server
	served chan struct{}
}

// Start listens on addr ("127.0.0.1:0" when empty) and serves h until Close.
// It returns the listener's address as "host:port". name says which fake it
// is, in errors.
func (s *Server) Start(name, addr string, h http.Handler) (string, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.http != nil {
		return "", fmt.Errorf("starting %s: %w", name, errors.New("already started"))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("starting %s: %w", name, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln) // always http.ErrServerClosed after Close
	}()
	s.http, s.served = srv, served
	return ln.Addr().String(), nil
}

// Close stops the listener and closes its connections, and waits for the
// serving goroutine to end. It does nothing when the server is not running.
func (s *Server) Close(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.http == nil {
		return nil
	}
	err := s.http.Close()
	<-s.served
	s.http, s.served = nil, nil
	if err != nil {
		return fmt.Errorf("closing %s: %w", name, err)
	}
	return nil
}
