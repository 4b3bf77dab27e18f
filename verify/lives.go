package verify

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/verifyrows"
)

// A key's lives (issue 22): every row a request writes names the key and the transaction that
// wrote it, so a key's rows are grouped by transaction, and each transaction is one life — one
// request that reserved the key and ran. A key lives again only after it expired; each life's
// audit event records the key's expiry as its transaction saw it, which is what proves that the
// next life came after it. Verify and the key view (package inspect) judge lives with the same rules (judgeLives).

// life is what one transaction wrote under a key.
type life struct {
	// xid is the transaction ("" for rows that do not record one: written before migration
	// 0004, judged by nothing here).
	xid                                      string
	first, last                              time.Time
	revisions, executions, reviews, messages int
	runAudits                                int
	// actions are the distinct actions of its audit events.
	actions []string
	// keyExpiresAt is the key's expiry as this transaction recorded it (nil: not recorded).
	keyExpiresAt *time.Time
	// partial: reviews and messages were not counted (the key view's rows do not hold them).
	partial bool
}

// KeyProblem is one thing wrong with a key's lives: which invariant, and what.
type KeyProblem struct {
	Invariant string
	// XID is the transaction whose life is wrong.
	XID string
	// Other is the transaction the life of XID ran twice with ("" for other problems).
	Other  string
	Detail string
}

// The write a run audit action stands for, and the rows it writes.
type runShape struct {
	what                                     string
	revisions, executions, reviews, messages int
}

func shapeOf(action string) (runShape, bool) {
	switch {
	case action == store.ActionRecordCreated:
		return runShape{what: "a create writes one revision", revisions: 1}, true
	case action == store.ActionRecordPatched:
		return runShape{what: "a patch writes one revision", revisions: 1}, true
	case action == store.ActionReviewCreated:
		return runShape{what: "a review writes one review", reviews: 1}, true
	case !strings.HasPrefix(action, "FEATURE_"):
		return runShape{}, false
	case strings.HasSuffix(action, "_"+store.FeatureExecuted):
		return runShape{what: "an internal feature writes one revision and one execution", revisions: 1, executions: 1}, true
	case strings.HasSuffix(action, "_"+store.FeatureBlocked):
		return runShape{what: "a blocked feature writes one execution", executions: 1}, true
	case strings.HasSuffix(action, "_"+store.FeatureQueued):
		return runShape{what: "an outbox feature writes one execution and one outbox message", executions: 1, messages: 1}, true
	}
	return runShape{}, false
}

// Stamp is a time as the verdicts and problems print it.
func Stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000Z") }

func plural(n int, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %ss", n, one)
}

// judgeLives checks a key's lives (any order; the row's may be nil): each transaction wrote one
// run of the shape its audit event names (key_rows_once), and each life came after the one before
// it expired, by the expiry the earlier transaction recorded (key_runs_once).
func judgeLives(key string, row *verifyrows.KeyRowFacts, lives []life) []KeyProblem {
	var out []KeyProblem
	add := func(inv, xid, format string, args ...any) *KeyProblem {
		out = append(out, KeyProblem{Invariant: inv, XID: xid, Detail: fmt.Sprintf(format, args...)})
		return &out[len(out)-1]
	}
	var attributed []life
	for _, l := range lives {
		if l.xid != "" {
			attributed = append(attributed, l)
		}
	}
	sort.SliceStable(attributed, func(i, j int) bool { return attributed[i].first.Before(attributed[j].first) })
	reserved := ""
	if row != nil && row.ReservedXID != nil {
		reserved = *row.ReservedXID
	}
	for _, l := range attributed {
		by := fmt.Sprintf("transaction %s (%s)", l.xid, Stamp(l.first))
		if row != nil && l.xid == reserved && row.Status == "PROCESSING" {
			add(InvKeyRowsOnce, l.xid, "key %s is PROCESSING, yet the transaction that reserved it, %s, wrote rows: its result was removed after it committed", quoteKey(key), by)
		}
		if l.runAudits != 1 {
			add(InvKeyRowsOnce, l.xid, "%s wrote %s of a run (%s) under key %s; a request writes one", by, plural(l.runAudits, "audit event"),
				strings.Join(l.actions, ", "), quoteKey(key))
			continue
		}
		shape, ok := shapeOf(l.actions[0])
		if !ok {
			continue
		}
		counts := []struct {
			got, want int
			what      string
		}{{l.revisions, shape.revisions, "revision"}, {l.executions, shape.executions, "execution"}}
		if !l.partial {
			counts = append(counts, struct {
				got, want int
				what      string
			}{l.reviews, shape.reviews, "review"}, struct {
				got, want int
				what      string
			}{l.messages, shape.messages, "outbox message"})
		}
		for _, c := range counts {
			if c.got != c.want {
				add(InvKeyRowsOnce, l.xid, "%s wrote %s under key %s with its %s audit event; %s", by, plural(c.got, c.what), quoteKey(key), l.actions[0], shape.what)
				break
			}
		}
	}
	for i, l := range attributed {
		if row != nil && l.xid != reserved && l.first.After(row.CreatedAt) {
			add(InvKeyRunsOnce, l.xid, "transaction %s ran under key %s at %s while the key's row, reserved at %s by transaction %s, held it",
				l.xid, quoteKey(key), Stamp(l.first), Stamp(row.CreatedAt), reserved).Other = reserved
			continue
		}
		if i == 0 {
			continue
		}
		prev, start := attributed[i-1], l.first
		if row != nil && l.xid == reserved && row.CreatedAt.Before(start) {
			start = row.CreatedAt
		}
		if prev.keyExpiresAt != nil && !prev.keyExpiresAt.After(start) {
			continue
		}
		why := "nothing records when the key expired after the first"
		if prev.keyExpiresAt != nil {
			why = "the first recorded the key as valid until " + Stamp(*prev.keyExpiresAt)
		}
		add(InvKeyRunsOnce, l.xid, "transaction %s at %s and transaction %s at %s both ran under key %s, and %s",
			prev.xid, Stamp(prev.first), l.xid, Stamp(l.first), quoteKey(key), why).Other = prev.xid
	}
	return out
}

// KeyLives judges a key's lives as verify does (key_rows_once, key_runs_once) from its timeline
// (store.DB.KeyHistory: the rows written under the key, the key row among them) and its key row
// (nil: none): what the key view shows beside the key.
func KeyLives(key string, row *verifyrows.KeyRowFacts, timeline []model.Event) []KeyProblem {
	return judgeLives(key, row, livesOf(timeline))
}

// livesOf groups a key's timeline entries by the transaction that wrote them (the key row's
// entry aside: it is the reservation, not a row the request wrote). Rows without a recorded
// transaction are left out: their lives are told by their references (groupLives).
func livesOf(events []model.Event) []life {
	by := map[string]*life{}
	var order []string
	for _, e := range events {
		if e.Kind == "key" || e.XID == nil || *e.XID == "" {
			continue
		}
		if e.Kind == "audit" && e.Action != nil && IsSettleAction(*e.Action) {
			continue // the outbox worker's, written later in its own transaction
		}
		l, ok := by[*e.XID]
		if !ok {
			l = &life{xid: *e.XID, first: e.At, last: e.At, partial: true}
			by[*e.XID] = l
			order = append(order, *e.XID)
		}
		if e.At.Before(l.first) {
			l.first = e.At
		}
		if e.At.After(l.last) {
			l.last = e.At
		}
		switch e.Kind {
		case "revision":
			l.revisions++
		case "execution":
			l.executions++
		case "audit":
			l.runAudits++
			if e.Action != nil && !contains(l.actions, *e.Action) {
				l.actions = append(l.actions, *e.Action)
			}
			if e.KeyExpiresAt != nil && (l.keyExpiresAt == nil || e.KeyExpiresAt.After(*l.keyExpiresAt)) {
				t := *e.KeyExpiresAt
				l.keyExpiresAt = &t
			}
		}
	}
	out := make([]life, 0, len(order))
	for _, x := range order {
		sort.Strings(by[x].actions)
		out = append(out, *by[x])
	}
	return out
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// IsSettleAction reports whether an audit action is the outbox worker's settle of a run.
func IsSettleAction(a string) bool {
	return strings.HasPrefix(a, "FEATURE_") &&
		(strings.HasSuffix(a, "_"+store.FeatureDelivered) || strings.HasSuffix(a, "_"+store.FeatureFailed))
}
