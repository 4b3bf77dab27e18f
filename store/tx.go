package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"idemwork/apperr"
)

// ambientKey is the context key of the ambient transaction. The value records which DB began
// it, so a context carrying one pool's transaction never routes another pool's statements.
type ambientKey struct{}

type ambient struct {
	db *DB
	tx pgx.Tx
}

// InTx reports whether ctx already carries an ambient transaction. It is a property of the
// context chain, never a global flag: a sibling context is unaffected.
func InTx(ctx context.Context) bool {
	_, ok := ctx.Value(ambientKey{}).(*ambient)
	return ok
}

// Q returns where a statement for ctx goes: the ambient transaction of this DB when ctx
// carries one, otherwise the pool.
func (db *DB) Q(ctx context.Context) Querier {
	if a, ok := ctx.Value(ambientKey{}).(*ambient); ok && a.db == db {
		return a.tx
	}
	return db.Pool
}

// Tx runs fn in a write transaction carried by the context fn receives. A nested call joins the
// ambient transaction (same connection, same transaction); only the outermost call commits, and
// any error from fn rolls the whole transaction back.
func (db *DB) Tx(ctx context.Context, fn func(ctx context.Context) error) error {
	if a, ok := ctx.Value(ambientKey{}).(*ambient); ok && a.db == db {
		return fn(ctx)
	}
	if db.ReadOnly {
		return apperr.New(apperr.ReadOnly, "this session is read-only; reconnect with --allow-writes (or allow_writes = true) to write")
	}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	txCtx := context.WithValue(ctx, ambientKey{}, &ambient{db: db, tx: tx})
	if err := fn(txCtx); err != nil {
		// The rollback uses a fresh context: a cancelled request must still release its locks.
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return TranslateError(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return TranslateError(fmt.Errorf("commit: %w", err))
	}
	return nil
}

// Savepoint runs fn under a named savepoint of the ambient transaction, so a step that must
// survive its own error rolls back only itself. It requires an ambient transaction.
func (db *DB) Savepoint(ctx context.Context, name string, fn func(ctx context.Context) error) error {
	a, ok := ctx.Value(ambientKey{}).(*ambient)
	if !ok || a.db != db {
		return errors.New("store: Savepoint needs an ambient transaction")
	}
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := a.tx.Exec(ctx, "SAVEPOINT "+ident); err != nil {
		return err
	}
	if err := fn(ctx); err != nil {
		if _, rbErr := a.tx.Exec(ctx, "ROLLBACK TO SAVEPOINT "+ident); rbErr != nil {
			return errors.Join(err, rbErr)
		}
		return err
	}
	_, err := a.tx.Exec(ctx, "RELEASE SAVEPOINT "+ident)
	return err
}
