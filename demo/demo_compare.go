package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store/demorows"
	"github.com/idemwork/idemwork/store/readmodel"
)

// CompareModes reads the two requests of the walk-throughs — blockedKey a direct_external run,
// outboxKey an outbox run, both of owner — and sets them side by side.
func CompareModes(ctx context.Context, k *kernel.Kernel, owner, blockedKey, outboxKey string) (model.ModeComparison, error) {
	var c model.ModeComparison
	var err error
	if c.Blocked, err = modeSide(ctx, k, owner, blockedKey); err != nil {
		return c, err
	}
	if c.Outbox, err = modeSide(ctx, k, owner, outboxKey); err != nil {
		return c, err
	}
	return c, nil
}

func modeSide(ctx context.Context, k *kernel.Kernel, owner, key string) (model.ModeSide, error) {
	side := model.ModeSide{Key: key, Committed: []string{}}
	row, err := readmodel.GetKey(ctx, k.DB(), owner, key)
	if err != nil {
		return side, err
	}
	side.Operation = row.Operation
	execs, err := demorows.ExecutionsForKey(ctx, k.DB(), owner, key)
	if err != nil {
		return side, err
	}
	if len(execs) != 1 {
		return side, apperr.New(apperr.ValidationFailed, "key %q wrote %d feature executions, not one: it is not a feature request of a walk-through", key, len(execs))
	}
	e := execs[0]
	side.Mode = e.Mode
	audit, err := readmodel.AuditForKey(ctx, k.DB(), owner, key)
	if err != nil {
		return side, err
	}
	messages, err := demorows.OutboxForExecution(ctx, k.DB(), owner, e.ID)
	if err != nil {
		return side, err
	}
	writers, err := demorows.KeyWriters(ctx, k.DB(), owner, key)
	if err != nil {
		return side, err
	}
	revisions := 0
	for _, w := range writers {
		if w.Table == "record_revision" {
			revisions++
		}
	}

	// The request's own audit event says what the execution was when it committed; the row may
	// have been settled since.
	committed := e.Status
	var request *model.AuditEvent
	for i := range audit {
		if audit[i].ExecutionID != nil && *audit[i].ExecutionID == e.ID {
			request = &audit[i]
			break
		}
	}
	if request != nil {
		var d struct {
			Status string `json:"status"`
		}
		if json.Unmarshal(request.Detail, &d) == nil && d.Status != "" {
			committed = d.Status
		}
	}
	now := ""
	if committed != e.Status {
		now = ", now " + e.Status
	}
	side.Committed = append(side.Committed,
		fmt.Sprintf("feature_execution %s: mode %s, status %s%s", e.ID, e.Mode, committed, now))
	if len(messages) == 0 {
		side.Committed = append(side.Committed, "no outbox message")
	}
	for _, m := range messages {
		side.Committed = append(side.Committed, fmt.Sprintf("outbox_message %s: provider %s, idempotency id %s", m.ID, m.Provider, m.IdempotencyID))
	}
	if request != nil {
		side.Committed = append(side.Committed, "audit_event "+request.Action)
	}
	side.Committed = append(side.Committed, fmt.Sprintf("idempotency_record %s → execution %s", row.Status, e.ID),
		fmt.Sprintf("record: %d revision(s) written, stays at revision %d", revisions, e.RecordRevision))

	side.Client = fmt.Sprintf("%s: {record %s@%d, execution %s %s}", model.OutcomeText("EXECUTED", &model.Execution{Status: committed}), e.RecordID, e.RecordRevision, e.ID, committed)

	_, restored, _, err := k.RestoreKey(ctx, owner, row.Key, row.ReservedXID, row.Operation, row.Response)
	switch {
	case err != nil:
		side.Replay = "fails closed: " + apperr.As(err).Message
	case restored == nil || restored.ID != e.ID:
		side.Replay = "REPLAYED, but not this execution"
	case restored.Status == committed:
		side.Replay = fmt.Sprintf("%s: the same execution, still %s", model.OutcomeText("REPLAYED", restored), restored.Status)
	default:
		side.Replay = fmt.Sprintf("%s: the same execution, now %s (as the worker settled it)", model.OutcomeText("REPLAYED", restored), restored.Status)
	}
	if side.Replay != "" && restored != nil && restored.Status == "BLOCKED" {
		side.Replay += " for good: nothing will ever deliver it"
	}

	var out []string
	for _, m := range messages {
		s := fmt.Sprintf("%s got idempotency id %s: message %s after %d attempt(s)", m.Provider, m.IdempotencyID, m.Status, m.Attempts)
		if m.Status == "PENDING" {
			s = fmt.Sprintf("%s will get idempotency id %s: message PENDING, %d attempt(s) so far", m.Provider, m.IdempotencyID, m.Attempts)
		}
		if m.LastError != nil && m.Status != "DELIVERED" {
			s += fmt.Sprintf(", last error %q", *m.LastError)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		out = append(out, "nothing, ever: no outbox message exists, and the request called no provider")
	}
	side.Provider = strings.Join(out, "; ")
	return side, nil
}
