package storm

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/storm/stormtypes"
)

// Env is what the engine needs from its host.
type Env struct {
	// Kernel serves in-process requests and the self-started HTTP server, and its database is
	// the one the verdict is read from. Required.
	Kernel *kernel.Kernel
	// DSN is the database children connect to (multi-process storms via inproc).
	DSN string
	// Executable is the binary children run (default os.Executable()); WorkerArgs its
	// arguments (default ["storm-worker"]); WorkerEnv extra environment entries.
	Executable string
	WorkerArgs []string
	WorkerEnv  []string
	// Serve serves the HTTP API for a storm over HTTP without URLs (the storm's own server in
	// this process); the host wires its HTTP adapter here. MaxBodyBytes caps that server's
	// request bodies, and its serving children's.
	Serve        ServeFunc
	MaxBodyBytes int64
	// Stderr receives the children's stderr as it comes (nil: kept only for error messages).
	Stderr io.Writer
	// ReadyTimeout bounds how long children may take to connect and warm up (default 1 minute).
	ReadyTimeout time.Duration
	// MaxConns caps every pool the storm opens (0: each sized for its share of the storm). A
	// cap below the concurrency makes requests queue for connections, as a small production
	// pool would.
	MaxConns int
	// OnLocks, when set, receives every lock sample as it is taken (each SampleEvery while the
	// storm runs). It runs on the sampler's goroutine and must not block.
	OnLocks func(stormtypes.LockSample)
}

// ServeFunc serves the HTTP API over k on ln until ctx ends, then shuts down gracefully (the
// requests in flight finish) and returns. The storm starts its own servers through it; it has no
// HTTP server of its own, so the host (the CLI) wires its adapter in.
type ServeFunc func(ctx context.Context, k *kernel.Kernel, ln net.Listener, opts ServeOptions) error

// ServeOptions configure a server a storm starts.
type ServeOptions struct {
	// Tokens maps the bearer tokens the server accepts to the owner each acts as.
	Tokens map[string]string
	// MaxBodyBytes caps a request body (0: the server's default).
	MaxBodyBytes int64
}

func usage(format string, args ...any) error { return apperr.New(apperr.Usage, format, args...) }

// appName names one of the storm's pools: p0 is this process, p1… its worker processes, s1…
// its servers.
func appName(id string, role byte, n int) string {
	return fmt.Sprintf("%s%c%d", stormtypes.AppNamePrefix(id), role, n)
}
