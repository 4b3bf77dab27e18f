package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/internal/faultproxy"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// overProxy opens a second pool on db's database through a fault proxy.
func overProxy(t *testing.T, db *testdb.DB) (*store.DB, *faultproxy.Proxy) {
	t.Helper()
	p := faultproxy.Start(t, db.DSN)
	pdb, err := store.Open(context.Background(), p.DSN(), store.Options{})
	require.NoError(t, err)
	t.Cleanup(pdb.Close)
	return pdb, p
}

func writeMarker(pdb *store.DB, id string) error {
	// Queued: the insert travels with BEGIN and COMMIT in the one round trip the proxy cuts.
	return pdb.TxBatch(context.Background(), func(_ context.Context, b *store.Batch) error {
		b.InsertAudit("mark", model.AuditEvent{ID: id, OwnerID: "alice", ModuleCode: "NOTE", Action: "MARK", At: time.Now()})
		return nil
	})
}

func markers(t *testing.T, db *testdb.DB, id string) int {
	t.Helper()
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_event WHERE id = $1`, id).Scan(&n))
	return n
}

func TestAConnectionLostAfterTheServerCommittedIsCommitUnknown(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	pdb, p := overProxy(t, db)
	p.Arm(faultproxy.AfterCommit)
	err := writeMarker(pdb, "after")
	<-p.Fired()
	ae := apperr.As(err)
	require.Equal(t, apperr.CommitUnknown, ae.Code, "%v", err)
	require.Equal(t, 503, ae.Status())
	require.Contains(t, ae.Message, "retry with the same Idempotency-Key")
	require.Equal(t, 1, markers(t, db, "after"), "the write did commit: the answer must not say it failed")
}

func TestAConnectionLostBeforeCommitReachedTheServerIsCommitUnknownToo(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	pdb, p := overProxy(t, db)
	p.Arm(faultproxy.BeforeCommit)
	err := writeMarker(pdb, "before")
	<-p.Fired()
	require.True(t, apperr.Is(err, apperr.CommitUnknown), "the client cannot tell this case from the one that committed: %v", err)
	require.Zero(t, markers(t, db, "before"))

	// The pool recovers: the next transaction commits normally.
	require.NoError(t, writeMarker(pdb, "next"))
	require.Equal(t, 1, markers(t, db, "next"))
}

// Issue 21, item 5: a backend terminated just after its COMMIT was made durable answers FATAL
// 57P01 where the COMMIT tag was due. The server spoke, but about the session, not the
// transaction: the write committed, and the answer is COMMIT_UNKNOWN, never "nothing committed".
func TestAFatalInPlaceOfTheCommitTagIsCommitUnknown(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	pdb, p := overProxy(t, db)
	p.Arm(faultproxy.FatalAfterCommit)
	err := writeMarker(pdb, "fatal")
	<-p.Fired()
	require.True(t, apperr.Is(err, apperr.CommitUnknown), "%v", err)
	require.Equal(t, 1, markers(t, db, "fatal"))
}

// A COMMIT tag read is the confirmation: a connection lost while draining what follows it in the
// batch changes nothing — the write committed and is answered so.
func TestALostConnectionAfterTheCommitTagIsASuccess(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	pdb, p := overProxy(t, db)
	p.Arm(faultproxy.CutAfterCommitTag)
	err := writeMarker(pdb, "tagged")
	<-p.Fired()
	require.NoError(t, err)
	require.Equal(t, 1, markers(t, db, "tagged"))
	require.NoError(t, writeMarker(pdb, "next"), "the pool recovers")
}

// Every way a round trip carrying COMMIT can fail, and what it means: a server's answer before
// COMMIT (an ERROR, or a FATAL ending the session) means the server never reached COMMIT;
// anything else where COMMIT's answer was due — or any failure of the connection once the round
// trip left — is COMMIT_UNKNOWN; a round trip that never left is not.
func TestCommitOutcomeTable(t *testing.T) {
	t.Parallel()
	fatal := &pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P01"}
	refused := &pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "23505"}
	for _, c := range []struct {
		name     string
		err      error
		atCommit bool
		unknown  bool
	}{
		{"an ERROR before COMMIT", refused, false, false},
		{"a FATAL before COMMIT", fatal, false, false},
		{"an ERROR in COMMIT's place (deferred constraint)", refused, true, false},
		{"a FATAL in COMMIT's place", fatal, true, true},
		{"EOF in COMMIT's place", io.ErrUnexpectedEOF, true, true},
		{"EOF before COMMIT's answer, the round trip sent", io.ErrUnexpectedEOF, false, true},
		{"a deadline", context.DeadlineExceeded, true, true},
		{"ROLLBACK in COMMIT's place", pgx.ErrTxCommitRollback, true, false},
		{"a coded refusal of a guarded write", apperr.New(apperr.RevisionConflict, "stale"), false, false},
	} {
		err := store.CommitOutcome(fmt.Errorf("commit: %w", c.err), c.atCommit)
		require.Equal(t, c.unknown, apperr.Is(err, apperr.CommitUnknown), c.name)
		require.ErrorIs(t, err, c.err, "%s: the cause is kept", c.name)
	}
}

func TestACommitTheServerRefusedIsNotCommitUnknown(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	pdb, _ := overProxy(t, db)
	conflict := apperr.New(apperr.RevisionConflict, "stale")
	err := pdb.TxBatch(context.Background(), func(_ context.Context, b *store.Batch) error {
		// Queued: it fails on the server in the round trip that carries the COMMIT.
		b.Queue(store.BatchWrite{Step: "guarded", What: "guarded", Guard: conflict, SQL: `SELECT 1 / 0`})
		return nil
	})
	require.True(t, errors.Is(err, conflict), "%v", err)
	err = pdb.TxBatch(context.Background(), func(_ context.Context, b *store.Batch) error {
		b.Queue(store.BatchWrite{Step: "bad", What: "bad", SQL: `SELECT no_such_column FROM audit_event`})
		return nil
	})
	require.Error(t, err)
	require.False(t, apperr.Is(err, apperr.CommitUnknown), "the server answered: the transaction rolled back")
}
