package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/readmodel"
	"github.com/idemwork/idemwork/store/verifyrows"
	"github.com/idemwork/idemwork/verify"
	"github.com/idemwork/idemwork/wire"
)

func errorView(err error) *model.ErrorView {
	ae := wire.Coded(err)
	return &model.ErrorView{Code: ae.Code, Status: ae.Status(), Message: ae.Message}
}

// keyHistoryCap bounds the rows of one key InspectKey reads (newest kept).
const keyHistoryCap = 500

// resultRef is what an envelope's result may reference.
type resultRef struct {
	RecordID    string `json:"recordId"`
	Revision    int    `json:"revision"`
	ExecutionID string `json:"executionId"`
	ReviewID    string `json:"reviewId"`
}

// Key reads a key of k's database in any state with its restored result, the latest record and
// its history. Restoring here runs the same policy a replay would, read-only; a restore that
// fails is reported (RestoreError) beside the stored envelope, never returned as the error.
func Key(ctx context.Context, k *kernel.Kernel, owner, key string) (model.KeyView, error) {
	if err := idemtype.ValidateKey(key); err != nil {
		return model.KeyView{}, err
	}
	return StoredKey(ctx, k, owner, key)
}

// StoredKey is Key for a key read from the database (a row of a list) rather than
// typed by a user: it is looked up as it is, so a planted or legacy row whose key breaks today's
// key rule can still be inspected.
func StoredKey(ctx context.Context, k *kernel.Kernel, owner, key string) (model.KeyView, error) {
	if err := idemtype.ValidateOwner(owner); err != nil {
		return model.KeyView{}, err
	}
	if key == "" {
		return model.KeyView{}, apperr.New(apperr.ValidationFailed, "key: empty")
	}
	row, err := readmodel.GetKey(ctx, k.DB(), owner, key)
	if err != nil {
		return model.KeyView{}, err
	}
	now := k.Runner().Clock().Now()
	v := model.KeyView{Key: row.Key, Operation: row.Operation, Status: row.Status, Fingerprint: row.Fingerprint,
		CreatedAt: row.CreatedAt, ExpiresAt: row.ExpiresAt, Envelope: row.Response, Expired: !row.ExpiresAt.After(now)}
	history, err := readmodel.KeyHistory(ctx, k.DB(), owner, key, keyHistoryCap)
	if err != nil {
		return model.KeyView{}, err
	}

	op, opErr := kernel.ParseOperation(row.Operation)
	var ref resultRef
	refOK := false
	if row.Response != nil {
		env, envErr := idemtype.ParseEnvelope(row.Response)
		switch {
		case envErr != nil:
			v.RestoreError = errorView(envErr)
		case env.Legacy:
			v.Legacy = true
		default:
			refOK = json.Unmarshal(env.Result, &ref) == nil
		}
		switch {
		case v.Legacy && opErr == nil && op.Kind == kernel.OpKindLegacy:
			// identity:create is refused before the runner (410); nothing is restored.
		case v.RestoreError == nil && opErr != nil:
			v.RestoreError = errorView(opErr)
		case v.RestoreError == nil:
			v.Restored.Record, v.Restored.Execution, v.Restored.Review, err = k.RestoreKey(ctx, owner, row.Key, row.ReservedXID, row.Operation, row.Response)
			if err != nil {
				v.Restored = model.RestoredView{}
				v.RestoreError = errorView(err)
			}
		}
	}
	if opErr == nil {
		recordID := op.RecordID
		if recordID == "" && v.Restored.Record != nil {
			recordID = v.Restored.Record.ID
		}
		if recordID == "" {
			recordID = ref.RecordID
		}
		if recordID == "" && row.Response != nil {
			// A tampered envelope may still name its record: show that record as it is now.
			var loose struct {
				Result resultRef `json:"result"`
			}
			_ = json.Unmarshal(row.Response, &loose)
			recordID = loose.Result.RecordID
		}
		if recordID != "" && kernel.CheckRecordID(recordID) == nil {
			latest, err := readmodel.LatestRecord(ctx, k.DB(), store.RecordRef{Owner: owner, Module: op.Module, ID: recordID})
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return model.KeyView{}, err
			}
			if err == nil {
				v.Latest.Record = &latest
			}
		}
	}
	v.Replay = replayResponse(ctx, k, owner, row, v.Expired)
	v.State, v.Next = keyVerdict(v, op, opErr == nil, now)
	var cur *resultRef
	if refOK {
		cur = &ref
	}
	facts := &verifyrows.KeyRowFacts{Status: row.Status, Operation: row.Operation, ReservedXID: row.ReservedXID, CreatedAt: row.CreatedAt, ExpiresAt: row.ExpiresAt}
	problems := verify.KeyLives(row.Key, facts, history)
	v.Problems = []string{}
	if v.RestoreError != nil && v.RestoreError.Code == apperr.SnapshotIntegrity {
		v.Problems = append(v.Problems, v.RestoreError.Message)
	}
	for _, p := range problems {
		v.Problems = append(v.Problems, p.Detail)
	}
	v.Lives = groupLives(history, cur, facts, problems)
	v.VerdictKind, v.Verdict = keyStory(v, facts, v.Lives, problems)
	return v, nil
}

// keyVerdict is what the next request with the key meets (SPEC §4.2), as a state and a sentence.
func keyVerdict(v model.KeyView, op kernel.Operation, opOK bool, now time.Time) (string, string) {
	stamp := v.ExpiresAt.UTC().Format("2006-01-02 15:04:05Z")
	switch {
	case v.Legacy && opOK && op.Kind == kernel.OpKindLegacy:
		return model.KeyLegacy, "legacy raw-json-v1 receipt: readable only, never replayed; identity:create writes are refused with 410 LEGACY_WRITE_DISABLED"
	case v.Expired:
		was := "a SUCCEEDED row"
		if v.Status == "PROCESSING" {
			was = "an abnormal PROCESSING leftover"
		}
		return model.KeyExpired, fmt.Sprintf("expired at %s (%s): never replayed again; the next request with this key deletes the row and executes anew", stamp, was)
	case v.Legacy:
		return model.KeyLegacy, fmt.Sprintf("legacy raw-json-v1 receipt: readable only, never replayed; a request with this key fails closed: %d %s", v.RestoreError.Status, v.RestoreError.Code)
	case v.Status == "PROCESSING":
		return model.KeyProcessing, fmt.Sprintf("abnormal — committed PROCESSING without a result: never treated as success, never re-executed; the next request with this key gets 409 IDEMPOTENCY_IN_PROGRESS until it expires at %s (in %s)",
			stamp, v.ExpiresAt.Sub(now).Round(time.Second))
	case v.RestoreError != nil:
		return model.KeyFailsClosed, fmt.Sprintf("a replay fails closed: %d %s: %s", v.RestoreError.Status, v.RestoreError.Code, v.RestoreError.Message)
	case v.Restored.Record != nil && v.Restored.Execution != nil:
		return model.KeySucceeded, fmt.Sprintf("a replay returns revision %d of record %s and execution %s (%s), the exact first result",
			v.Restored.Record.Revision, v.Restored.Record.ID, v.Restored.Execution.ID, v.Restored.Execution.Status)
	case v.Restored.Record != nil:
		return model.KeySucceeded, fmt.Sprintf("a replay returns revision %d of record %s, the exact first result", v.Restored.Record.Revision, v.Restored.Record.ID)
	case v.Restored.Review != nil:
		return model.KeySucceeded, fmt.Sprintf("a replay returns review %s (verdict %s), the exact first result", v.Restored.Review.ID, v.Restored.Review.Verdict)
	}
	return model.KeySucceeded, "a replay returns the first result"
}

// Life kinds (KeyLife.Kind).
const (
	lifeCurrent      = "current"
	lifeEarlier      = "earlier"
	lifeTwice        = "twice"
	lifeUnattributed = "unattributed"
)

// groupLives splits a key's rows by the transaction that wrote them: each transaction is one
// life (issue 22: never by falling back to the reservation's time). The current life is the one
// of the transaction that reserved the key row. Another is "earlier" when the expiry it recorded
// came before the next life began, else it ran while the key was still valid ("twice"). The
// outbox worker's settle events, written later in its own transaction, go with the execution
// they settle. Rows that record no transaction (written before migration 0004) are grouped by
// what they reference (an audit event names its revision and its execution); such a group is the
// current life only when it holds what the envelope references.
func groupLives(events []model.Event, ref *resultRef, row *verifyrows.KeyRowFacts, problems []verify.KeyProblem) []model.KeyLife {
	reserved := ""
	if row != nil && row.ReservedXID != nil {
		reserved = *row.ReservedXID
	}
	twice := map[string]bool{}
	for _, p := range problems {
		if p.Invariant == verify.InvKeyRunsOnce {
			twice[p.XID], twice[p.Other] = true, true
		}
	}
	// The life of each execution, for the settle events that name it.
	execLife := map[string]string{}
	for _, e := range events {
		if e.Kind == "execution" && e.XID != nil {
			execLife[e.ID] = *e.XID
		}
	}
	byXID := map[string]*model.KeyLife{}
	var order []string
	var old []model.Event // rows that record no transaction
	var keyRows []model.Event
	for _, e := range events {
		if e.Kind == "key" {
			keyRows = append(keyRows, e)
			continue
		}
		xid := ""
		if e.XID != nil {
			xid = *e.XID
		}
		if e.Kind == "audit" && e.Action != nil && verify.IsSettleAction(*e.Action) && e.ExecutionID != nil {
			if x, ok := execLife[*e.ExecutionID]; ok {
				xid = x
			}
		}
		if xid == "" {
			old = append(old, e)
			continue
		}
		l, ok := byXID[xid]
		if !ok {
			l = &model.KeyLife{XID: xid, Events: []model.Event{}}
			byXID[xid] = l
			order = append(order, xid)
		}
		l.Events = append(l.Events, e)
	}
	var lives []model.KeyLife
	var current *model.KeyLife
	for _, x := range order {
		l := byXID[x]
		sort.SliceStable(l.Events, func(i, j int) bool { return l.Events[i].At.Before(l.Events[j].At) })
		first := verify.Stamp(l.Events[0].At)
		switch {
		case x == reserved:
			l.Current, l.Kind = true, lifeCurrent
			l.Label = fmt.Sprintf("current life: transaction %s, from %s", x, first)
			current = l
			continue
		case twice[x]:
			l.Kind = lifeTwice
			l.Label = fmt.Sprintf("another run: transaction %s at %s, while the key was still valid (ran twice)", x, first)
		default:
			l.Kind = lifeEarlier
			l.Label = fmt.Sprintf("earlier life: transaction %s at %s; the key expired before the next ran", x, first)
			for _, e := range l.Events {
				if e.Kind == "audit" && e.KeyExpiresAt != nil {
					l.Label = fmt.Sprintf("earlier life: transaction %s at %s; the key expired at %s, before the next ran", x, first, verify.Stamp(*e.KeyExpiresAt))
					break
				}
			}
		}
		lives = append(lives, *l)
	}
	for _, g := range unattributedLives(old, ref, current == nil) {
		if g.Current {
			current = &g
			continue
		}
		lives = append(lives, g)
	}
	if current == nil {
		label := "current life: the key row only (its transaction wrote no row of this key)"
		if reserved != "" {
			label = fmt.Sprintf("current life: transaction %s, which wrote no row of this key", reserved)
		}
		current = &model.KeyLife{Current: true, Kind: lifeCurrent, XID: reserved, Label: label, Events: []model.Event{}}
	}
	current.Events = append(current.Events, keyRows...)
	sort.SliceStable(current.Events, func(i, j int) bool { return current.Events[i].At.Before(current.Events[j].At) })
	// The current life first, then the others newest first.
	sort.SliceStable(lives, func(i, j int) bool { return lives[i].Events[0].At.After(lives[j].Events[0].At) })
	return append([]model.KeyLife{*current}, lives...)
}

// unattributedLives groups rows that record no transaction by what they reference; the group
// holding what the envelope references is the current life when mayBeCurrent.
func unattributedLives(events []model.Event, ref *resultRef, mayBeCurrent bool) []model.KeyLife {
	if len(events) == 0 {
		return nil
	}
	anchors := func(e model.Event) []string {
		var a []string
		switch {
		case e.Kind == "execution":
			a = append(a, "x:"+e.ID)
		case e.Kind == "revision" || e.Kind == "audit":
			if e.ExecutionID != nil {
				a = append(a, "x:"+*e.ExecutionID)
			}
			if e.RecordID != nil && e.Revision != nil {
				a = append(a, fmt.Sprintf("r:%s:%d", *e.RecordID, *e.Revision))
			}
		}
		if len(a) == 0 {
			a = append(a, "e:"+e.Kind+":"+e.ID)
		}
		return a
	}
	parent := map[string]string{}
	var find func(string) string
	find = func(x string) string {
		p, ok := parent[x]
		if !ok || p == x {
			parent[x] = x
			return x
		}
		r := find(p)
		parent[x] = r
		return r
	}
	for _, e := range events {
		a := anchors(e)
		root := find(a[0])
		for _, x := range a[1:] {
			parent[find(x)] = root
		}
	}
	currentRoot := ""
	if ref != nil && mayBeCurrent {
		anchor := ""
		if ref.ExecutionID != "" {
			anchor = "x:" + ref.ExecutionID
		} else if ref.RecordID != "" && ref.Revision > 0 {
			anchor = fmt.Sprintf("r:%s:%d", ref.RecordID, ref.Revision)
		}
		if _, seen := parent[anchor]; anchor != "" && seen {
			currentRoot = find(anchor)
		}
	}
	groups := map[string]*model.KeyLife{}
	var order []string
	for _, e := range events {
		root := find(anchors(e)[0])
		if _, ok := groups[root]; !ok {
			groups[root] = &model.KeyLife{Kind: lifeUnattributed, Events: []model.Event{}}
			order = append(order, root)
		}
		groups[root].Events = append(groups[root].Events, e)
	}
	out := make([]model.KeyLife, 0, len(order))
	for _, root := range order {
		g := groups[root]
		first := verify.Stamp(g.Events[0].At)
		g.Label = fmt.Sprintf("rows from %s written before migration 0004: their transaction is not recorded", first)
		if root == currentRoot {
			g.Current, g.Kind = true, lifeCurrent
			g.Label = fmt.Sprintf("current life: rows from %s written before migration 0004 (transaction not recorded)", first)
		}
		out = append(out, *g)
	}
	return out
}

// replayResponse is the answer a request repeating the key's first request gets now
// (kernel.ReplayKey), as the HTTP API would send it (wire): 201 with the record's Location for a
// create or a review, 200 for a patch or a feature run, the coded error the request would fail
// with otherwise. Nil when no request gets a replay: the key expired (the next request executes
// anew), or its operation is not one a request can name.
func replayResponse(ctx context.Context, k *kernel.Kernel, owner string, row model.KeyRow, expired bool) *model.Response {
	if expired {
		return nil
	}
	rp, ok, err := k.ReplayKey(ctx, owner, row)
	var r model.Response
	switch {
	case !ok:
		return nil
	case err != nil:
		r = wire.Error(err)
	case rp.Kind == kernel.OpKindCreate:
		r = wire.Created(rp.Write)
	case rp.Kind == kernel.OpKindReview:
		r = wire.Write(http.StatusCreated, rp.Review.Outcome, rp.Review.Waited, rp.Review)
	default:
		r = wire.Written(rp.Write)
	}
	return &r
}
