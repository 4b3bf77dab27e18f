package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/readmodel"
)

// settingsInTx reads, inside one of idemwork's transactions, every setting it depends on.
func settingsInTx(t *testing.T, db *store.DB) map[string]string {
	t.Helper()
	ctx := context.Background()
	names := []string{"search_path", "transaction_read_only", "transaction_isolation", "statement_timeout", "lock_timeout",
		"idle_in_transaction_session_timeout", "TimeZone", "DateStyle", "IntervalStyle", "extra_float_digits", "bytea_output",
		"standard_conforming_strings", "synchronous_commit", "session_replication_role", "exit_on_error"}
	cols := make([]string, len(names))
	for i, n := range names {
		cols[i] = fmt.Sprintf("current_setting('%s')", n)
	}
	vals := make([]string, len(names)+1)
	dest := make([]any, len(vals))
	for i := range vals {
		dest[i] = &vals[i]
	}
	require.NoError(t, db.Q(ctx).QueryRow(ctx, "SELECT "+strings.Join(cols, ", ")+", current_user::text").Scan(dest...))
	out := map[string]string{"current_user": vals[len(names)]}
	for i, n := range names {
		out[n] = vals[i]
	}
	return out
}

// Another client of a transaction pooler leaves every session setting behind on the pool's only
// server connection — the search_path of the other schema, a read-only and serializable default,
// short timeouts, another TimeZone and DateStyle, synchronous_commit off, session_replication_role
// replica, a SET ROLE to a role without privileges, temporary tables named like idemwork's —
// and idemwork, told of the pooler or not, with a schema or without, reads and writes as if
// nothing were there: every transaction sets what it depends on, and the connection keeps what
// the other client left (nothing idemwork did leaked either way).
func TestWhatAnotherClientLeftOnAServerConnectionChangesNothing(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		pooler string
		schema string
	}{{"undeclared", "", ""}, {"undeclared-schema", "", "app"}, {"declared", "transaction", ""}, {"declared-schema", "transaction", "app"}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			name := testdb.NewEmptyDatabase(t)
			migrateInto(t, name, "public")
			migrateInto(t, name, "app")
			intended, other := "public", "app"
			if c.schema != "" {
				intended, other = "app", "public"
			}
			// The test server commits with synchronous_commit = off; this database's sessions start
			// with on, so the leaked off is a change idemwork must not inherit.
			testdb.Admin(t, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" SET synchronous_commit = on")
			role := testdb.NewRole(t, "nobody", name)
			b := testdb.NewBouncer(t, store.PoolerTransaction, testdb.BouncerOptions{PoolSize: 1})
			lb := testdb.EveryGUC(other)
			lb.Role = role
			require.Equal(t, 1, testdb.Pollute(t, b, name, lb))

			dsn := b.DSN(name)
			if c.pooler != "" {
				dsn = b.PoolerDSN(name)
			}
			db := openVia(t, dsn, store.Options{Schema: c.schema, MaxConns: 2})
			got := settingsInTx(t, db)
			wantPath := map[string]string{"": `"$user", public, pg_temp`, "app": `"app", pg_temp`}[c.schema]
			require.Equal(t, map[string]string{"search_path": wantPath, "transaction_read_only": "off", "transaction_isolation": "read committed",
				"statement_timeout": "0", "lock_timeout": "0", "idle_in_transaction_session_timeout": "0", "TimeZone": "UTC",
				"DateStyle": "ISO, MDY", "IntervalStyle": "postgres", "extra_float_digits": "1", "bytea_output": "hex",
				"standard_conforming_strings": "on", "synchronous_commit": "on", "session_replication_role": "origin", "exit_on_error": "off",
				"current_user": "postgres"}, got)

			// A statement longer than the leaked statement_timeout runs to its end.
			_, err := db.Q(ctx).Exec(ctx, "SELECT pg_sleep(0.3)")
			require.NoError(t, err)
			// Writes land in the intended schema, not in the leaked path's nor in a temporary table.
			writeRecord(t, db, "r1")
			writeRecord(t, db, "r2")
			require.Equal(t, 2, recordsIn(t, name, intended))
			require.Zero(t, recordsIn(t, name, other))
			// Foreign keys hold (session_replication_role is origin in idemwork's transactions).
			err = db.TxBatch(ctx, func(_ context.Context, bt *store.Batch) error {
				bt.Queue(store.BatchWrite{Step: "revision", What: "insert revision", SQL: `INSERT INTO record_revision (owner_id, record_id, revision, snapshot, created_at)
					VALUES ('alice', 'no-such-record', 1, '{}', now())`})
				return nil
			})
			require.Error(t, err, "a revision of a record that does not exist must be refused by the foreign key")
			// A stored time reads back as the instant it is, whatever TimeZone and DateStyle were left.
			recs, _, err := readmodel.Records(ctx, db, model.RecordQuery{Owner: "alice", Limit: 10})
			require.NoError(t, err)
			require.Len(t, recs, 2)
			require.WithinDuration(t, time.Now(), recs[0].CreatedAt, time.Minute)

			paths, tempRows := testdb.ServerPaths(t, b, name, lb.TempTables)
			require.Equal(t, []string{other}, paths, "the test ran against the polluted server connection, and left it as it was")
			require.Zero(t, tempRows, "nothing was written into the temporary tables that shadow idemwork's")
		})
	}
}

// A role whose own settings (ALTER ROLE … SET) are read-only, serializable and on another
// schema still gets idemwork's transactions as idemwork needs them, straight to PostgreSQL: the
// access mode and isolation are BEGIN's, the schema is idemwork's ([database] schema), and the
// role's statement_timeout — a deliberate choice, not a leak — is kept. A role that starts its
// sessions with session_replication_role = replica, which it may not set back, is refused with
// PERMISSION_DENIED saying where to reset it, and nothing is written.
func TestARolesOwnSettingsDoNotChangeWhatIdemworkDoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := testdb.NewEmptyDatabase(t)
	migrateInto(t, name, "app")
	role := testdb.NewRole(t, "tuned", name)
	r := pgx.Identifier{role}.Sanitize()
	testdb.AdminIn(t, name, "GRANT USAGE ON SCHEMA app TO "+r+"; GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA app TO "+r)
	testdb.Admin(t, "ALTER ROLE "+r+" SET default_transaction_read_only = on")
	testdb.Admin(t, "ALTER ROLE "+r+" SET default_transaction_isolation = 'serializable'")
	testdb.Admin(t, "ALTER ROLE "+r+" SET search_path = public")
	testdb.Admin(t, "ALTER ROLE "+r+" SET statement_timeout = '7s'")
	asRole := store.WithDSNParams(testdb.DSNOf(t, name), [][2]string{{"user", role}})

	db := openVia(t, asRole, store.Options{Schema: "app", MaxConns: 1})
	got := settingsInTx(t, db)
	require.Equal(t, "off", got["transaction_read_only"])
	require.Equal(t, "read committed", got["transaction_isolation"])
	require.Equal(t, `"app", pg_temp`, got["search_path"])
	require.Equal(t, "7s", got["statement_timeout"], "the role's own timeout is the one idemwork keeps")
	writeRecord(t, db, "r1")
	require.Equal(t, 1, recordsIn(t, name, "app"))
	db.Close()

	testdb.Admin(t, "ALTER ROLE "+r+" SET session_replication_role = replica")
	_, err := store.Open(ctx, asRole, store.Options{Schema: "app", MaxConns: 1})
	msg := requireCode(t, err, apperr.PermissionDenied)
	require.Contains(t, msg, "session_replication_role")
	require.Contains(t, msg, "ALTER ROLE … RESET session_replication_role")
	require.Equal(t, 1, recordsIn(t, name, "app"))
}
