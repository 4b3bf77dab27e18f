package idem

// How a key's row answers a request (the hit of SPEC §4.2, flow.go's hit) and the errors the
// flow's steps name.

import (
	"context"
	"errors"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
)

// ReplayStored is what the runner answers a request that repeats the first request of a live
// stored key — same operation, same fingerprint: IDEMPOTENCY_IN_PROGRESS for a row without its
// result (PROCESSING), else the stored envelope restored by policy, outcome REPLAYED, the
// envelope being the stored bytes. The runner answers every such hit through the same code; an
// inspector calls it to show what a retry of the key gets.
func ReplayStored[T any](ctx context.Context, policy ResultPolicy[T], owner, key, module, status string, response []byte) (Result[T], error) {
	return answerStored(ctx, policy, owner, key, module, status, response, nil)
}

func answerStored[T any](ctx context.Context, policy ResultPolicy[T], owner, key, module, status string, response []byte,
	pre restoreFunc[T]) (Result[T], error) {
	if status != statusSucceeded {
		return Result[T]{}, inProgress(key)
	}
	v, err := restoreEnvelope(ctx, policy, owner, module, response, pre)
	if err != nil {
		return Result[T]{}, err
	}
	// jsonb hands the envelope back in its own text, which is the canonical form BuildEnvelope
	// wrote (package jsonb pins the two together): the first call's bytes.
	return Result[T]{Value: v, Outcome: idemtype.Replayed, Envelope: response}, nil
}

const statusSucceeded = "SUCCEEDED"

// The runner's own steps, as a StepError names them.
const (
	// StepReserve is the reservation: the key's PROCESSING row (or the deletion of an expired one).
	StepReserve = "reservation"
	// StepSuccess is the success row: the key's SUCCEEDED envelope, sent with COMMIT.
	StepSuccess = "success"
)

// StepError is the failure of one step of a call's transaction: the runner's own (StepReserve,
// StepSuccess), or a write a driver or a caller queued under a step name of its own. Its text is
// the failed statement's ("reserve key: …").
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }

var errReservationVanished = errors.New("idempotency: the reservation vanished before success was recorded")

// waitedError is an error a request got after it waited on the unique index for the
// transaction that held its key (the same reserved_xid fact that sets Result.Waited).
type waitedError struct{ error }

func (e waitedError) Unwrap() error { return e.error }

func afterWait(waited bool, err error) error {
	if !waited {
		return err
	}
	return waitedError{err}
}

// WaitedOnIndex reports whether err came after a wait on the unique index for another
// transaction holding the key (Result.Waited for a call that failed).
func WaitedOnIndex(err error) bool {
	var w waitedError
	return errors.As(err, &w)
}

func inProgress(key string) error {
	return apperr.New(apperr.InProgress, "key %q is reserved by a request that did not finish (a leftover PROCESSING row); it is never re-executed and frees itself when it expires", key)
}
