// Package records holds the reads of single rows the kernel's write and replay paths make — a
// record (locked or not, or read ahead in the reservation's round trip: ReadAhead), a revision
// with its parent and attestation, an execution, a review — in ctx's transaction when it
// carries one. The rows' writes travel in the transaction's store.Batch; the names the reads
// take (store.RecordRef, RevisionRef, ExecutionRef, ReviewRef) are the store's, shared by every
// job.
package records
