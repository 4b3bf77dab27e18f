package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/jsonb"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/readmodel"
	"github.com/idemwork/idemwork/store/records"
)

// explainReuse adds to a write's IDEMPOTENCY_KEY_REUSED which fields of r differ from the key's
// first request (ExplainKeyReuse), whichever door r came through; any other error, and a
// report that cannot be read, leave err as it is. It costs reads on that refusal only.
func (k *Kernel) explainReuse(ctx context.Context, r model.WriteRequest, err error) error {
	var ae *apperr.Error
	if !errors.As(err, &ae) || ae.Code != apperr.KeyReused || ctx.Err() != nil {
		return err
	}
	rep, xerr := k.ExplainKeyReuse(ctx, r)
	if xerr != nil {
		return err
	}
	return apperr.Wrap(apperr.KeyReused, err, "%s; %s", ae.Message, rep.Text())
}

// ExplainKeyReuse compares r with the first request of its key, field by field: the fields the
// fingerprint covers (SPEC §4.1). The first request is rebuilt from the key's rows — a create's
// revision 1, a patch's revision and the one before it, a feature run's execution — and kept
// only when its fingerprint is the stored one; the report names the fields that differ and
// never shows a stored body the envelope does not keep.
func (k *Kernel) ExplainKeyReuse(ctx context.Context, r model.WriteRequest) (model.ReuseReport, error) {
	rep := model.ReuseReport{Key: r.Key(), Operation: r.Operation()}
	unknown := func(format string, args ...any) (model.ReuseReport, error) {
		rep.Unknown = fmt.Sprintf(format, args...)
		return rep, nil
	}
	if r.Key() == "" {
		return unknown("the request has no key")
	}
	row, err := readmodel.GetKey(ctx, k.db, r.Owner(), r.Key())
	if apperr.CodeOf(err) == apperr.NotFound {
		return unknown("the key has no row any more (it expired, or was reaped)")
	}
	if err != nil {
		return rep, err
	}
	if row.Operation != rep.Operation {
		return unknown("the key is bound to another operation, %s", row.Operation)
	}
	if row.Status != "SUCCEEDED" || row.Response == nil {
		return unknown("the key's row is %s and holds no result to rebuild its request from", row.Status)
	}
	env, err := idemtype.ParseEnvelope(row.Response)
	if err != nil || env.Legacy {
		return unknown("the key's envelope cannot be read (%s)", apperr.As(err).Code)
	}
	var ref struct {
		RecordID    string `json:"recordId"`
		Revision    int    `json:"revision"`
		ExecutionID string `json:"executionId"`
	}
	if json.Unmarshal(env.Result, &ref) != nil || ref.RecordID == "" {
		return unknown("the key's envelope names no record")
	}
	first, err := k.rebuildFirst(ctx, r, ref.RecordID, ref.Revision, ref.ExecutionID)
	if err != nil {
		if apperr.CodeOf(err) == apperr.RecordNotFound {
			return unknown("the rows its envelope names are gone (%s)", apperr.As(err).Message)
		}
		return rep, err
	}
	op := rep.Operation
	var match *model.WriteRequest
	for i := range first {
		if sameFingerprint(row.Fingerprint, op, first[i]) {
			match = &first[i]
			break
		}
	}
	if match == nil {
		return unknown("no request its rows describe has the stored fingerprint (another program wrote it, or its rows changed since)")
	}
	rep.Rebuilt = true
	rep.Fields = diffRequests(*match, r)
	return rep, nil
}

// rebuildFirst lists the requests the key's rows allow: where a field the first request may
// have left out has its default (or, for a patch, its earlier value), both spellings.
func (k *Kernel) rebuildFirst(ctx context.Context, r model.WriteRequest, recordID string, revision int, executionID string) ([]model.WriteRequest, error) {
	owner, module := r.Owner(), r.Module()
	snapshot := func(rev int) (model.Record, error) {
		got, err := readmodel.GetRevision(ctx, k.db, owner, recordID, rev)
		if err != nil {
			return model.Record{}, err
		}
		var rec model.Record
		if err := json.Unmarshal(got.Snapshot, &rec); err != nil {
			return model.Record{}, apperr.New(apperr.SnapshotIntegrity, "revision %d of record %s is not a record snapshot", rev, recordID)
		}
		return rec, nil
	}
	var out []model.WriteRequest
	switch r.Kind {
	case model.KindCreate:
		rec, err := snapshot(revision)
		if err != nil {
			return nil, err
		}
		payload, _ := model.CanonicalObject("payload", rec.Payload)
		for _, s := range optional(rec.Summary, rec.Summary == "") {
			for _, p := range optionalJSON(payload, string(payload) == "{}") {
				out = append(out, model.WriteRequest{Kind: model.KindCreate, Create: model.CreateInput{Owner: owner, Module: module,
					Key: r.Key(), Title: rec.Title, Summary: s, Payload: p}})
			}
		}
	case model.KindPatch:
		after, err := snapshot(revision)
		if err != nil {
			return nil, err
		}
		before, err := snapshot(revision - 1)
		if err != nil {
			return nil, err
		}
		pa, _ := model.CanonicalObject("payload", after.Payload)
		pb, _ := model.CanonicalObject("payload", before.Payload)
		for _, t := range optional(after.Title, after.Title == before.Title) {
			for _, s := range optional(after.Summary, after.Summary == before.Summary) {
				for _, p := range optionalJSON(pa, bytes.Equal(pa, pb)) {
					out = append(out, model.WriteRequest{Kind: model.KindPatch, Patch: model.PatchInput{Owner: owner, Module: module,
						RecordID: recordID, Key: r.Key(), ExpectRevision: revision - 1, Title: t, Summary: s, Payload: p}})
				}
			}
		}
	case model.KindAction:
		e, err := records.FindExecution(ctx, k.db, store.ExecutionRef{Owner: owner, Module: module, RecordID: recordID, ID: executionID})
		if err != nil {
			return nil, apperr.Wrap(apperr.RecordNotFound, err, "execution %s", executionID)
		}
		in, _ := model.CanonicalObject("input", e.Input)
		for _, i := range optionalJSON(in, string(in) == "{}") {
			out = append(out, model.WriteRequest{Kind: model.KindAction, Feature: model.FeatureInput{Owner: owner, Module: module,
				RecordID: recordID, FeatureID: r.Feature.FeatureID, Key: r.Key(), Input: i}})
		}
	}
	return out, nil
}

// optional is a text field's possible spellings: given, and also left out when leftOut says the
// rows cannot tell.
func optional(v string, leftOut bool) []*string {
	out := []*string{&v}
	if leftOut {
		out = append(out, nil)
	}
	return out
}

func optionalJSON(v json.RawMessage, leftOut bool) []json.RawMessage {
	out := []json.RawMessage{v}
	if leftOut {
		out = append(out, nil)
	}
	return out
}

// sameFingerprint reports whether request r has the stored fingerprint, by the stored version's
// rule, in the body's current encoding or the one before defaults were left out.
func sameFingerprint(stored, op string, r model.WriteRequest) bool {
	bodies := requestBodies(r)
	switch idem.FingerprintVersion(stored) {
	case 2:
		return slices.ContainsFunc(bodies, func(b []byte) bool { return b != nil && idem.Fingerprint(op, b) == stored })
	case 1:
		v1, err := bodyV1Of(r)
		if err != nil {
			return false
		}
		fp, err := idem.FingerprintV1(op, v1)
		return err == nil && fp == stored
	}
	return false
}

// requestBodies are r's canonical body and, where it differs, its earlier encoding.
func requestBodies(r model.WriteRequest) [][]byte {
	switch r.Kind {
	case model.KindPatch:
		in := r.Patch
		return [][]byte{model.PatchBody(in.ExpectRevision, in.Title, in.Summary, in.Payload)}
	case model.KindAction:
		return [][]byte{model.FeatureBody(r.Feature.Input), model.FeatureBodyAsSent(r.Feature.Input)}
	}
	in := r.Create
	return [][]byte{model.CreateBody(in.Title, in.Summary, in.Payload), model.CreateBodyAsSent(in.Title, in.Summary, in.Payload)}
}

// bodyV1Of is r's body as fingerprint version 1 read it (the kernel's BodyV1).
func bodyV1Of(r model.WriteRequest) ([]byte, error) {
	switch r.Kind {
	case model.KindPatch:
		in := r.Patch
		return bodyV1(map[string]any{"expectRevision": in.ExpectRevision, "title": in.Title, "summary": in.Summary, "payload": in.Payload})
	case model.KindAction:
		if r.Feature.Input == nil {
			return []byte(`{}`), nil
		}
		return bodyV1(map[string]any{"input": r.Feature.Input})
	}
	in := r.Create
	return bodyV1(map[string]any{"title": in.Title, "summary": in.Summary, "payload": in.Payload})
}

// diffRequests names the fields of now that differ from first, compared as the fingerprint
// compares them (a create's and a feature run's defaults equal to being left out).
func diffRequests(first, now model.WriteRequest) []model.FieldDiff {
	var out []model.FieldDiff
	text := func(name string, a, b *string, defaultEmpty bool) {
		if defaultEmpty {
			if deref(a) != deref(b) {
				out = append(out, model.FieldDiff{Name: name})
			}
			return
		}
		switch {
		case a == nil && b != nil:
			out = append(out, model.FieldDiff{Name: name, Detail: "the first request left it out"})
		case a != nil && b == nil:
			out = append(out, model.FieldDiff{Name: name, Detail: "the first request set it; this one leaves it out"})
		case a != nil && *a != *b:
			out = append(out, model.FieldDiff{Name: name})
		}
	}
	object := func(name string, a, b json.RawMessage, defaultEmpty bool) {
		ca, cb := canonicalOrEmpty(name, a, defaultEmpty), canonicalOrEmpty(name, b, defaultEmpty)
		switch {
		case ca == nil && cb != nil:
			out = append(out, model.FieldDiff{Name: name, Detail: "the first request left it out"})
		case ca != nil && cb == nil:
			out = append(out, model.FieldDiff{Name: name, Detail: "the first request set it; this one leaves it out"})
		case !bytes.Equal(ca, cb):
			detail := ""
			if paths := jsonPaths(name, ca, cb, 3); len(paths) > 0 {
				detail = "at " + strings.Join(paths, ", ")
			}
			out = append(out, model.FieldDiff{Name: name, Detail: detail})
		}
	}
	switch now.Kind {
	case model.KindPatch:
		a, b := first.Patch, now.Patch
		if a.ExpectRevision != b.ExpectRevision {
			out = append(out, model.FieldDiff{Name: "expectRevision", Detail: fmt.Sprintf("first %d, now %d", a.ExpectRevision, b.ExpectRevision)})
		}
		text("title", a.Title, b.Title, false)
		text("summary", a.Summary, b.Summary, false)
		object("payload", a.Payload, b.Payload, false)
	case model.KindAction:
		object("input", first.Feature.Input, now.Feature.Input, true)
	default:
		a, b := first.Create, now.Create
		if a.Title != b.Title {
			out = append(out, model.FieldDiff{Name: "title"})
		}
		text("summary", a.Summary, b.Summary, true)
		object("payload", a.Payload, b.Payload, true)
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// canonicalOrEmpty is a JSON member's canonical text: {} for one left out where that is the
// default, nil for one left out where it is not, the text itself when it does not pass the
// boundary (it then differs from anything stored).
func canonicalOrEmpty(field string, raw json.RawMessage, defaultEmpty bool) []byte {
	if raw == nil {
		if defaultEmpty {
			return []byte(`{}`)
		}
		return nil
	}
	c, err := model.CanonicalObject(field, raw)
	if err != nil {
		return raw
	}
	return c
}

// jsonPaths names up to max members (payload.a.b) where two JSON objects differ, the shallowest
// first; the values are not shown.
func jsonPaths(root string, a, b []byte, max int) []string {
	va, errA := decodeValue(a)
	vb, errB := decodeValue(b)
	if errA != nil || errB != nil {
		return nil
	}
	// A member name as one RFC 6901 pointer token.
	pointerEscape := strings.NewReplacer("~", "~0", "/", "~1")
	var out []string
	var walk func(path string, x, y any)
	walk = func(path string, x, y any) {
		if len(out) >= max {
			return
		}
		mx, okx := x.(map[string]any)
		my, oky := y.(map[string]any)
		if !okx || !oky {
			if !jsonEqual(x, y) {
				out = append(out, path)
			}
			return
		}
		names := make([]string, 0, len(mx)+len(my))
		for n := range mx {
			names = append(names, n)
		}
		for n := range my {
			if _, ok := mx[n]; !ok {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		for _, n := range names {
			walk(jsonb.Path(path, "/"+pointerEscape.Replace(n)), mx[n], my[n])
		}
	}
	walk(root, va, vb)
	return out
}

func decodeValue(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	return v, d.Decode(&v)
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
