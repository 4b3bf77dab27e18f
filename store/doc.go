// Package store is the session every job of the database needs: one pgxpool per process opened
// under a policy (DSN, pooler, exec mode, search_path, read-only), the ambient transaction
// carried in context.Context (nested calls join it; InTx tells whether a context carries one),
// a sqlx handle over the same pool, errors translated into coded ones, and the names of rows
// the jobs share. A transaction's writes can be queued in an explicit Batch (TxBatch) that
// travels with its COMMIT in one round trip, each write under the step it belongs to (a refused
// write fails as that step, *StepError).
//
// The jobs are packages of their own below it (store/records, replay, readmodel, verifyrows,
// outboxrows, reap, legacy, demorows, stormrows, dbfacts), functions taking the *DB; this
// package imports none of them, and knows nothing of the envelope a key row stores.
package store
