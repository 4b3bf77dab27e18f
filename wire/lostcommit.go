package wire

import (
	"fmt"

	"github.com/idemwork/idemwork/apperr"
)

// LostCommit words COMMIT_UNKNOWN for the write it answers (any other error comes back as it is).
// A COMMIT was sent and its answer never came, so the write may or may not have committed: with
// an Idempotency-Key, a retry with the same key tells which (it replays the first result if the
// write committed, and runs it once if not); without one, a retry could run it a second time, so
// the answer says the record may exist and look says how to see whether it does.
func LostCommit(err error, key, look string) error {
	if err == nil || apperr.CodeOf(err) != apperr.CommitUnknown {
		return err
	}
	const lost = "the connection to the database was lost while the write was committing, so it may or may not have committed"
	msg := fmt.Sprintf("%s: retry with the same Idempotency-Key (%s) to learn which — the retry replays the first result if it committed "+
		"and runs the write once if it did not", lost, key)
	if key == "" {
		msg = fmt.Sprintf("%s, and it had no Idempotency-Key, so sending it again could run it twice: the record may exist — %s before "+
			"sending it again (a write with a key is safe to retry)", lost, look)
	}
	return &apperr.Error{Code: apperr.CommitUnknown, Message: msg, Err: apperr.As(err).Err}
}
