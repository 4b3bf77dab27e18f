package inspect

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store/verifyrows"
	"github.com/idemwork/idemwork/verify"
)

// keyStory is a key's verdict in words (issue 22): what its rows say happened — read from the
// rows' keys, transactions, times and digests, never inferred from the reservation's time — and
// what a retry gets now. lives are groupLives' (the current life first).
func keyStory(v model.KeyView, row *verifyrows.KeyRowFacts, lives []model.KeyLife, problems []verify.KeyProblem) (string, string) {
	retry := retryPhrase(v)
	cur := lives[0]
	ran := ranPhrase(cur)
	with := func(s string) string {
		if retry == "" {
			return s
		}
		return s + "; " + retry
	}
	var twice, shape *verify.KeyProblem
	for i := range problems {
		switch {
		case problems[i].Invariant == verify.InvKeyRunsOnce && twice == nil:
			twice = &problems[i]
		case problems[i].Invariant == verify.InvKeyRowsOnce && shape == nil:
			shape = &problems[i]
		}
	}
	switch {
	case v.State == model.KeyLegacy:
		return model.VerdictLegacy, v.Next
	case v.RestoreError != nil && v.RestoreError.Code == apperr.SnapshotIntegrity:
		return model.VerdictTampered, with("tampered: " + v.RestoreError.Message)
	case shape != nil:
		return model.VerdictTampered, with("tampered: " + shape.Detail)
	case twice != nil:
		return model.VerdictRanTwice, with("ran twice: " + twice.Detail)
	case v.Status == "PROCESSING":
		by := ""
		if row != nil && row.ReservedXID != nil {
			by = " (transaction " + *row.ReservedXID + ")"
		}
		text := with(fmt.Sprintf("abnormal: reserved at %s%s and committed without its result — nothing ran", verify.Stamp(v.CreatedAt), by))
		if !v.Expired {
			text += " until the key expires at " + verify.Stamp(v.ExpiresAt)
		}
		return model.VerdictProcessing, text
	case v.RestoreError != nil:
		return model.VerdictFailsClosed, with(fmt.Sprintf("fails closed: %s: %s; it %s", v.RestoreError.Code, v.RestoreError.Message, ran))
	}
	earlier := ""
	for _, l := range lives[1:] {
		if l.Kind == lifeEarlier {
			if exp := recordedExpiry(l); exp != nil {
				earlier = verify.Stamp(*exp)
			} else {
				earlier = "the expiry its transaction recorded"
			}
			break // lives[1:] are newest first: the one right before the current
		}
	}
	switch {
	case v.Expired && earlier != "":
		return model.VerdictExpired, with(fmt.Sprintf("expired at %s: it had expired at %s before and ran again: it %s", verify.Stamp(v.ExpiresAt), earlier, ran))
	case v.Expired:
		return model.VerdictExpired, with(fmt.Sprintf("expired at %s: it %s", verify.Stamp(v.ExpiresAt), ran))
	case earlier != "":
		return model.VerdictRanAgainAfterExpiry, with(fmt.Sprintf("expired at %s and ran again: it %s", earlier, ran))
	}
	return model.VerdictExecutedOnce, with(ran)
}

// ranPhrase says when and by which transaction the current life ran: "executed once at …
// (transaction 8812)".
func ranPhrase(cur model.KeyLife) string {
	var first *time.Time
	for _, e := range cur.Events {
		if e.Kind != "key" {
			first = &e.At
			break
		}
	}
	switch {
	case first == nil && cur.XID != "":
		return fmt.Sprintf("wrote no row under this key (transaction %s)", cur.XID)
	case first == nil:
		return "wrote no row under this key"
	case cur.XID == "":
		return fmt.Sprintf("executed once at %s (transaction not recorded: written before migration 0004)", verify.Stamp(*first))
	}
	return fmt.Sprintf("executed once at %s (transaction %s)", verify.Stamp(*first), cur.XID)
}

// recordedExpiry is the key's expiry a life's own audit event recorded (nil: none).
func recordedExpiry(l model.KeyLife) *time.Time {
	for _, e := range l.Events {
		if e.Kind == "audit" && e.KeyExpiresAt != nil && (e.Action == nil || !verify.IsSettleAction(*e.Action)) {
			return e.KeyExpiresAt
		}
	}
	return nil
}

// retryPhrase says what a retry of the key's first request gets now ("" when nothing can).
func retryPhrase(v model.KeyView) string {
	if v.Expired {
		return "a retry executes anew (the key expired, so nothing is replayed)"
	}
	r := v.Replay
	if r == nil {
		return ""
	}
	if r.Status >= 400 {
		var body struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal([]byte(r.Body), &body)
		return fmt.Sprintf("a retry gets %d %s", r.Status, body.Error.Code)
	}
	switch rec, ex := v.Restored.Record, v.Restored.Execution; {
	case rec != nil && ex != nil:
		return fmt.Sprintf("a retry gets %d with record %s, revision %d and execution %s (%s)", r.Status, rec.ID, rec.Revision, ex.ID, ex.Status)
	case rec != nil:
		return fmt.Sprintf("a retry gets %d with record %s, revision %d", r.Status, rec.ID, rec.Revision)
	case v.Restored.Review != nil:
		return fmt.Sprintf("a retry gets %d with review %s", r.Status, v.Restored.Review.ID)
	}
	return fmt.Sprintf("a retry gets %d", r.Status)
}
