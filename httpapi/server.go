package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/idemwork/idemwork/apperr"
)

// ShutdownGrace is how long in-flight requests get to finish after a shutdown signal.
const ShutdownGrace = 10 * time.Second

// CheckLoopbackAddr refuses a listen address that is not on loopback: this project only ever
// listens on 127.0.0.1/::1 unless the user explicitly allows otherwise.
func CheckLoopbackAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return apperr.New(apperr.Usage, "--addr %q: want host:port, e.g. 127.0.0.1:8787", addr)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	if host == "" {
		host = "every interface"
	}
	return apperr.New(apperr.Usage, "--addr %s listens on %s, not loopback; idemwork serves 127.0.0.1 or ::1 only (pass --allow-remote to override, e.g. behind a TLS proxy)", addr, host)
}

// Listen opens a TCP listener on addr; unless allowRemote, the address it actually bound must be
// a loopback one (a "localhost" that resolves elsewhere is refused too). The few errors net/http
// answers itself leave its connections as the JSON error object too (see rawerrors.go).
func Listen(addr string, allowRemote bool) (net.Listener, error) {
	if !allowRemote {
		if err := CheckLoopbackAddr(addr); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	if !allowRemote {
		if ta, ok := ln.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
			_ = ln.Close()
			return nil, apperr.New(apperr.Usage, "--addr %s bound %s, which is not loopback; pass --allow-remote to override", addr, ln.Addr())
		}
	}
	return jsonErrorsListener{ln}, nil
}

// NewServer wraps h in an http.Server with timeouts suited to an API (no slowloris, bounded
// request reading), logging its own errors to errLog (nil: discarded).
func NewServer(h http.Handler, errLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          errLog,
	}
}

// Serve serves srv on ln until ctx is done, then shuts down gracefully: the listener closes at
// once and in-flight requests get up to grace to finish. It returns nil after a clean shutdown.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serveErr := <-errc; serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
