// Package legacy holds the statements of the legacy receipts (raw-json-v1 rows no write path
// writes any more): the verification's counts and the redaction (kernel's VerifyLegacy and
// RedactLegacy), the data-migration ledger that gates the redaction, and the insert that seeds
// receipts for the demo and the tests. Which rows are receipts is said by the caller (Receipts,
// with the path at which the envelope names its policy): the store never knows the envelope.
package legacy
