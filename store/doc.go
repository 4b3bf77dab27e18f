// Package store owns the database: one pgxpool per process, the ambient transaction carried in
// context.Context (nested calls join it; InTx tells whether a context carries one), a sqlx
// handle over the same pool for read models, read-only sessions enforced by the server, and the
// repositories and read models built on them. A transaction's writes can be queued in an
// explicit Batch (TxBatch) that travels with its COMMIT in one round trip, each write under the
// step it belongs to (a refused write fails as that step, *StepError).
package store
