package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/wire"
)

func errorView(err error) *ErrorView {
	ae := wire.Coded(err)
	return &ErrorView{Code: ae.Code, Status: ae.Status(), Message: ae.Message}
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

// InspectKey reads a key in any state with its restored result, the latest record and its
// history. Restoring here runs the same policy a replay would, read-only; a restore that fails
// is reported (RestoreError) beside the stored envelope, never returned as the error.
func (k *Kernel) InspectKey(ctx context.Context, owner, key string) (KeyView, error) {
	if err := idemtype.ValidateKey(key); err != nil {
		return KeyView{}, err
	}
	return k.InspectStoredKey(ctx, owner, key)
}

// InspectStoredKey is InspectKey for a key read from the database (a row of a list) rather than
// typed by a user: it is looked up as it is, so a planted or legacy row whose key breaks today's
// key rule can still be inspected.
func (k *Kernel) InspectStoredKey(ctx context.Context, owner, key string) (KeyView, error) {
	if err := idemtype.ValidateOwner(owner); err != nil {
		return KeyView{}, err
	}
	if key == "" {
		return KeyView{}, apperr.New(apperr.ValidationFailed, "key: empty")
	}
	row, err := k.db.GetKey(ctx, owner, key)
	if err != nil {
		return KeyView{}, err
	}
	now := k.runner.Clock().Now()
	v := KeyView{Key: row.Key, Operation: row.Operation, Status: row.Status, Fingerprint: row.Fingerprint,
		CreatedAt: row.CreatedAt, ExpiresAt: row.ExpiresAt, Envelope: row.Response, Expired: !row.ExpiresAt.After(now)}
	history, err := k.db.KeyHistory(ctx, owner, key, keyHistoryCap)
	if err != nil {
		return KeyView{}, err
	}

	op, opErr := ParseOperation(row.Operation)
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
		case v.Legacy && opErr == nil && op.Kind == OpKindLegacy:
			// identity:create is refused before the runner (410); nothing is restored.
		case v.RestoreError == nil && opErr != nil:
			v.RestoreError = errorView(opErr)
		case v.RestoreError == nil:
			v.Restored.Record, v.Restored.Execution, v.Restored.Review, err = k.RestoreKey(ctx, owner, row.Operation, row.Response)
			if err != nil {
				v.Restored = RestoredView{}
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
		if recordID != "" && CheckRecordID(recordID) == nil {
			latest, err := k.db.LatestRecord(ctx, owner, op.Module, recordID)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return KeyView{}, err
			}
			if err == nil {
				v.Latest.Record = &latest
			}
		}
	}
	v.Replay = k.replayResponse(ctx, owner, row, v.Expired)
	v.State, v.Verdict = keyVerdict(v, op, opErr == nil, now)
	var cur *resultRef
	if refOK {
		cur = &ref
	}
	v.Lives = groupLives(history, cur, row.CreatedAt)
	return v, nil
}

// keyVerdict is what the next request with the key meets (SPEC §4.2), as a state and a sentence.
func keyVerdict(v KeyView, op Operation, opOK bool, now time.Time) (string, string) {
	stamp := v.ExpiresAt.UTC().Format("2006-01-02 15:04:05Z")
	switch {
	case v.Legacy && opOK && op.Kind == OpKindLegacy:
		return KeyLegacy, "legacy raw-json-v1 receipt: readable only, never replayed; identity:create writes are refused with 410 LEGACY_WRITE_DISABLED"
	case v.Expired:
		was := "a SUCCEEDED row"
		if v.Status == "PROCESSING" {
			was = "an abnormal PROCESSING leftover"
		}
		return KeyExpired, fmt.Sprintf("expired at %s (%s): never replayed again; the next request with this key deletes the row and executes anew", stamp, was)
	case v.Legacy:
		return KeyLegacy, fmt.Sprintf("legacy raw-json-v1 receipt: readable only, never replayed; a request with this key fails closed: %d %s", v.RestoreError.Status, v.RestoreError.Code)
	case v.Status == "PROCESSING":
		return KeyProcessing, fmt.Sprintf("abnormal — committed PROCESSING without a result: never treated as success, never re-executed; the next request with this key gets 409 IDEMPOTENCY_IN_PROGRESS until it expires at %s (in %s)",
			stamp, v.ExpiresAt.Sub(now).Round(time.Second))
	case v.RestoreError != nil:
		return KeyFailsClosed, fmt.Sprintf("a replay fails closed: %d %s: %s", v.RestoreError.Status, v.RestoreError.Code, v.RestoreError.Message)
	case v.Restored.Record != nil && v.Restored.Execution != nil:
		return KeySucceeded, fmt.Sprintf("a replay returns revision %d of record %s and execution %s (%s), the exact first result",
			v.Restored.Record.Revision, v.Restored.Record.ID, v.Restored.Execution.ID, v.Restored.Execution.Status)
	case v.Restored.Record != nil:
		return KeySucceeded, fmt.Sprintf("a replay returns revision %d of record %s, the exact first result", v.Restored.Record.Revision, v.Restored.Record.ID)
	case v.Restored.Review != nil:
		return KeySucceeded, fmt.Sprintf("a replay returns review %s (verdict %s), the exact first result", v.Restored.Review.ID, v.Restored.Review.Verdict)
	}
	return KeySucceeded, "a replay returns the first result"
}

// groupLives splits a key's rows by the reservation that wrote them. Rows that reference one
// another (an audit event names its revision and its execution) form one life. The current life
// is the key row and the life holding what the envelope references; without a readable
// envelope (PROCESSING, tampered) it is the lives written since the row was reserved. Every
// other life is earlier: the key expired and a request executed with it anew.
func groupLives(events []store.Event, ref *resultRef, reservedAt time.Time) []KeyLife {
	anchors := func(e store.Event) []string {
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
		if e.Kind == "key" {
			continue
		}
		a := anchors(e)
		root := find(a[0])
		for _, x := range a[1:] {
			parent[find(x)] = root
		}
	}
	var refAnchors []string
	if ref != nil {
		if ref.ExecutionID != "" {
			refAnchors = append(refAnchors, "x:"+ref.ExecutionID)
		} else if ref.RecordID != "" && ref.Revision > 0 {
			refAnchors = append(refAnchors, fmt.Sprintf("r:%s:%d", ref.RecordID, ref.Revision))
		}
	}
	currentRoot := map[string]bool{}
	for _, a := range refAnchors {
		if _, seen := parent[a]; seen {
			currentRoot[find(a)] = true
		}
	}
	groups := map[string]*KeyLife{}
	var order []string
	now := KeyLife{Current: true, Label: "current life (reserved " + reservedAt.UTC().Format("2006-01-02 15:04:05.000Z") + ")", Events: []store.Event{}}
	var last = map[string]time.Time{}
	for _, e := range events {
		if e.Kind == "key" {
			continue
		}
		root := find(anchors(e)[0])
		if _, ok := groups[root]; !ok {
			groups[root] = &KeyLife{}
			order = append(order, root)
		}
		groups[root].Events = append(groups[root].Events, e)
		if e.At.After(last[root]) {
			last[root] = e.At
		}
	}
	var earlier []*KeyLife
	for _, root := range order {
		g := groups[root]
		current := currentRoot[root]
		if len(refAnchors) == 0 {
			current = !last[root].Before(reservedAt)
		}
		if current {
			now.Events = append(now.Events, g.Events...)
		} else {
			earlier = append(earlier, g)
		}
	}
	for _, e := range events {
		if e.Kind == "key" {
			now.Events = append(now.Events, e)
		}
	}
	sort.SliceStable(now.Events, func(i, j int) bool { return now.Events[i].At.Before(now.Events[j].At) })
	lives := []KeyLife{now}
	// Earlier lives, newest first, numbered from the oldest.
	sort.SliceStable(earlier, func(i, j int) bool { return earlier[i].Events[0].At.After(earlier[j].Events[0].At) })
	for i, g := range earlier {
		g.Label = fmt.Sprintf("earlier life %d (from %s; the key expired and ran again after it)", len(earlier)-i, g.Events[0].At.UTC().Format("2006-01-02 15:04:05.000Z"))
		lives = append(lives, *g)
	}
	return lives
}
