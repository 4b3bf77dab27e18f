// Package libinspect is the workbench's read side of a service's database: one written by the
// runner library (idem.Migrate's table, a service's own rows beside it), not by idemwork's
// kernel. It shows a key as the next request meets it — envelope, state, verdict, and the
// result restored through the service's own policy where the service registered one (a
// Plugin), the stored reference otherwise — and checks the runner's invariants over every key.
// It only reads.
package libinspect
