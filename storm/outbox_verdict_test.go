package storm_test

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/outbox"
	"github.com/idemwork/idemwork/storm"
	"github.com/idemwork/idemwork/storm/stormtypes"
)

// The outbox worker settles the message of a COMMITMENT F02 storm and audits the delivery with
// the key (FEATURE_F02_DELIVERED). That event is the worker's, not the storm's operation's: a
// storm's verdict counts only the audit events its operation writes, so a storm on the key after
// the delivery still agrees — and one of the same operation's writes too many is still caught.
func TestAStormCountsOnlyTheAuditEventsItsOperationWrites(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.newRecord(t, "uma", kernel.ModuleCommitment, `{"status":"OPEN"}`)
	spec := stormtypes.Spec{Op: stormtypes.OpAction, N: 20, Concurrency: 5, Share: false,
		Action: model.FeatureInput{Owner: "uma", Module: kernel.ModuleCommitment, RecordID: id, FeatureID: "F02", Key: "k-notify"}}
	sum, err := storm.Run(ctxFor(t), b.env, spec, nil)
	require.NoError(t, err)
	require.True(t, sum.Verified.Agrees, "%v", sum.Verified.Problems)
	require.Equal(t, "PENDING", sum.Verified.ExecutionStatus)

	w := outbox.NewWorker(b.db.DB, outbox.Options{Providers: map[string]outbox.Provider{"notifier": outbox.NewMemoryProvider()}})
	rep, err := w.RunOnce(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Delivered)
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM audit_event WHERE owner_id = 'uma' AND idempotency_key = 'k-notify'`),
		"the run's event and the worker's delivery both carry the key")

	sum, err = storm.Run(ctxFor(t), b.env, spec, nil)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"REPLAYED": 20}, sum.Outcomes)
	require.True(t, sum.Verified.Agrees, "%v", sum.Verified.Problems)
	require.Equal(t, 1, sum.Verified.AuditEvents)
	require.Equal(t, stormtypes.VerdictAgrees, sum.Verdict.Verdict, sum.Verdict.Text)

	// An event the operation itself wrote twice is still a disagreement.
	_, err = b.db.Pool.Exec(ctx, `INSERT INTO audit_event (owner_id, id, module_code, record_id, action, revision, execution_id, idempotency_key, detail, at)
		SELECT owner_id, id || 'x', module_code, record_id, action, revision, execution_id, idempotency_key, detail, at FROM audit_event
		WHERE owner_id = 'uma' AND idempotency_key = 'k-notify' AND action = 'FEATURE_F02_QUEUED'`)
	require.NoError(t, err)
	sum, err = storm.Run(ctxFor(t), b.env, spec, nil)
	require.NoError(t, err)
	require.False(t, sum.Verified.Agrees)
	require.Contains(t, sum.Verified.Problems, "2 audit events carry the key, want 1")
}

// A worker process that fails says why in the storm's error, in the words a client would be
// told (here: its database does not exist), never as a bare "internal error".
func TestAFailedWorkerProcessSaysWhy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	env := b.env
	env.DSN = testdb.WithDatabase(b.db.DSN, "no_such_database")
	spec := createSpec("vic", "k-worker")
	spec.N, spec.Processes = 4, 2
	_, err := storm.Run(ctxFor(t), env, spec, nil)
	require.Error(t, err)
	ae := apperr.As(err)
	// The child's own code (a missing database has none of its own yet, issue 21 adds one).
	require.Contains(t, []apperr.Code{apperr.Internal, "DATABASE_NOT_FOUND"}, ae.Code)
	// Either worker may be the first to fail; the error names the one that did.
	require.Regexp(t, `storm: worker process [12] exited before it was ready`, ae.Message)
	require.Contains(t, ae.Message, `database "no_such_database" does not exist (SQLSTATE 3D000)`)
	require.Contains(t, ae.Message, "connect to ")
}

// Issue 28: a storm whose worker processes cannot reach the database while they get ready
// answers DATABASE_UNAVAILABLE with the cause — what the same failure in this process answers —
// not INTERNAL "worker process N exited before it was ready".
func TestAStormWhoseWorkersCannotReachTheDatabaseIsDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close()) // nothing listens there now: every connect is refused
	env := b.env
	env.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/idemwork?sslmode=disable&connect_timeout=5", port)
	spec := createSpec("wendy", "k-unreachable")
	spec.N, spec.Processes = 4, 2
	_, err = storm.Run(ctxFor(t), env, spec, nil)
	require.Error(t, err)
	ae := apperr.As(err)
	require.Equal(t, apperr.DatabaseUnavailable, ae.Code, ae.Message)
	require.Regexp(t, `storm: worker process [12] exited before it was ready: .*connection refused`, ae.Message)
}
