package idem

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// Table is the name of the runner's table (in Options.Schema): one row per (owner_id,
// idempotency_key), created by Migrate.
const Table = "idempotency_record"

// statements are the runner's SQL, its table named with its schema in each (built once per
// Runner: the same text every call, for the statement cache).
type statements struct {
	reserve, readKey, readAfterConflict, deleteExpired, success, successHeld string
}

func newStatements(table string) statements {
	return statements{
		// reserve inserts the PROCESSING row. If another transaction holds the key, PostgreSQL
		// makes this INSERT wait on the unique index until that transaction ends. It returns
		// whether this call now holds the key, and the snapshot the INSERT started with (to tell
		// later whether it waited). A key row already committed is seen first (NOT EXISTS) and no
		// row is formed at all: forming one evaluates reserved_xid's default,
		// pg_current_xact_id(), which gives the transaction an id — and a hit's transaction,
		// which writes nothing, would then commit through the WAL.
		reserve: `WITH ins AS (
			INSERT INTO ` + table + ` (owner_id, idempotency_key, operation, fingerprint, status, created_at, expires_at, updated_at)
			SELECT $1, $2, $3, $4, 'PROCESSING', $5::timestamptz, $6::timestamptz, $5::timestamptz
			WHERE NOT EXISTS (SELECT 1 FROM ` + table + ` WHERE owner_id = $1 AND idempotency_key = $2)
			ON CONFLICT (owner_id, idempotency_key) DO NOTHING
			RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM ins), pg_current_snapshot()::text`,
		readKey: `SELECT operation, fingerprint, status, response, expires_at
		FROM ` + table + ` WHERE owner_id = $1 AND idempotency_key = $2`,
		// readAfterConflict also says whether the row's reserving transaction was still running
		// when this call's INSERT took its snapshot ($3): then the INSERT waited for it.
		readAfterConflict: `SELECT operation, fingerprint, status, response, expires_at,
			pg_visible_in_snapshot(reserved_xid, $3::pg_snapshot)
		FROM ` + table + ` WHERE owner_id = $1 AND idempotency_key = $2`,
		deleteExpired: `DELETE FROM ` + table + ` WHERE owner_id = $1 AND idempotency_key = $2 AND expires_at <= $3`,
		// success fails on the server (division by zero) when no PROCESSING row is there to
		// update, so the COMMIT behind it in the same round trip never runs.
		success: `WITH u AS (UPDATE ` + table + ` SET status = 'SUCCEEDED', response = $3, updated_at = $4
				WHERE owner_id = $1 AND idempotency_key = $2 AND status = 'PROCESSING' RETURNING 1)
			SELECT 1 / count(*) FROM u`,
		// successHeld is success for a RunAhead call, whose round trip carries it whether or not
		// the reservation ahead of it was won: it updates only the row this transaction reserved
		// (nothing behind a lost reservation, where the key row is another's) and returns how
		// many rows it updated.
		successHeld: `WITH u AS (UPDATE ` + table + ` SET status = 'SUCCEEDED', response = $3, updated_at = $4
				WHERE owner_id = $1 AND idempotency_key = $2 AND status = 'PROCESSING'
					AND reserved_xid = pg_current_xact_id_if_assigned() RETURNING 1)
			SELECT count(*) FROM u`,
	}
}

// isDivisionByZero reports the failure of a statement written to divide by its own row count.
func isDivisionByZero(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "22012"
}
