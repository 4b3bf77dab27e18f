// Package kernel is the record kernel: the modules of SPEC §8 with rules that can change at run
// time, create/patch/feature/review writes run through the idempotency runner as one commit
// unit (record, immutable revision, execution, audit, reservation, envelope), the concrete
// result policies of SPEC §5, the JSON boundary and snapshot integrity checks of SPEC §6, the
// fail-closed blocked_external mode and the outbox of SPEC §7, and the legacy IDENTITY tools.
package kernel
