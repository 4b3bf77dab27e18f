// Package readmodel holds the store's read models: what the views, the CLI, the HTTP record
// routes, inspect and the demos read — pages of records, keys, executions, audit events and
// outbox messages, a record's head and its history, the timeline and its export, the sessions
// on the server. Every function takes the session's *store.DB and reads through it (its sqlx
// Reader or its Q), so the session's policy (read-only, search_path, pooler) holds for each.
// It only reads; nothing here writes, and nothing below the store imports it.
package readmodel
