package httpapi

import (
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/wire"
)

// Starting is what `idemwork serve` answers while its database is not open yet (unreachable,
// still starting, a connect timeout running): it listens from the start, /healthz answers at
// once (the process is alive), /readyz and every other route answer 503 DATABASE_UNAVAILABLE
// with Retry-After and the last attempt's reason, and nothing is done. Once the database is
// open, Ready hands every request to the API.
type Starting struct {
	api atomic.Pointer[API]

	mu    sync.Mutex
	cause error
	where string
}

// NewStarting answers for serve until Ready; where names the database it is opening.
func NewStarting(where string) *Starting { return &Starting{where: where} }

// Failed records why the last attempt to open the database failed.
func (s *Starting) Failed(err error) {
	s.mu.Lock()
	s.cause = err
	s.mu.Unlock()
}

// Ready hands every request from now on to api.
func (s *Starting) Ready(api *API) { s.api.Store(api) }

// ServeHTTP answers r: through the API once it is ready.
func (s *Starting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if api := s.api.Load(); api != nil {
		api.ServeHTTP(w, r)
		return
	}
	if r.Method == http.MethodGet && r.URL.Path == "/healthz" {
		wire.JSON(http.StatusOK, map[string]bool{"ok": true}).Serve(w)
		return
	}
	s.mu.Lock()
	cause, where := s.cause, s.where
	s.mu.Unlock()
	msg := "the database (" + where + ") is not open yet: idemwork serve is still connecting; nothing was done, retry after Retry-After"
	if cause != nil {
		msg = "the database (" + where + ") is not open yet, and the last attempt failed: " + wire.Coded(cause).Message +
			"; idemwork serve keeps trying; nothing was done, retry after Retry-After"
	}
	wire.Error(apperr.New(apperr.DatabaseUnavailable, "%s", msg)).Serve(w)
}
