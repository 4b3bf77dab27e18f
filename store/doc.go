// Package store owns the database: one pgxpool per process, the ambient transaction carried in
// context.Context (nested calls join it; InTx tells whether a context carries one), a sqlx
// handle over the same pool for read models, read-only sessions enforced by the server, and the
// repositories and read models built on them.
package store
