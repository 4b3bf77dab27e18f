// Package model holds the plain data the workbench's layers exchange: the rows the store reads,
// the queries that select them, the requests and results of the kernel's writes, a key as the
// next request meets it, reports and demo steps — and the pure checks on them (key and owner
// rules, the JSON boundary's quick check). It imports nothing of the module but apperr, jsonb and
// the runner library's database-free vocabulary (idem/idemtype: outcomes, envelopes, key and
// owner syntax), so the views can depend on it without depending on the database: store and
// kernel alias these types, so no layer converts between copies of them.
package model
