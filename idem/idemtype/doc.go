// Package idemtype holds the runner's vocabulary that needs no database: the outcome of a call,
// the stored envelope and its strict parser, the syntax of keys and owner ids, and the names of
// the HTTP headers of the idempotency contract. Package idem (the runner), its HTTP middleware,
// and code that only reads or displays what the runner stored (a workbench view, a CLI, a
// service's own admin page) share these types without importing the database driver, as River's
// rivertype does for its job rows.
package idemtype
