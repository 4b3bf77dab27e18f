package model

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/idemwork/idemwork/jsonb"
)

// One request, one body, one fingerprint. Every door builds a write through this file: the
// workbench's form, its Storm and ctrl+r (Fields), the CLI's flags and an HTTP body (NewCreate,
// NewPatch, NewFeature), and the kernel encodes the body it fingerprints with CreateBody,
// PatchBody and FeatureBody. So a create typed into the form, fired by a storm or sent by
// `idemwork create` with the same fields is one request, and a retry through any door replays it.

// Write kinds (WriteRequest.Kind, Fields.Kind).
const (
	KindCreate = "create"
	KindPatch  = "patch"
	KindAction = "action"
)

// WriteRequest is one write, whichever kind: Create, Patch or Feature is the one Kind names.
type WriteRequest struct {
	Kind    string
	Create  CreateInput
	Patch   PatchInput
	Feature FeatureInput
}

// Owner is the request's owner.
func (r WriteRequest) Owner() string {
	switch r.Kind {
	case KindPatch:
		return r.Patch.Owner
	case KindAction:
		return r.Feature.Owner
	}
	return r.Create.Owner
}

// Key is the request's Idempotency-Key ("" none).
func (r WriteRequest) Key() string {
	switch r.Kind {
	case KindPatch:
		return r.Patch.Key
	case KindAction:
		return r.Feature.Key
	}
	return r.Create.Key
}

// Module is the request's module.
func (r WriteRequest) Module() string {
	switch r.Kind {
	case KindPatch:
		return r.Patch.Module
	case KindAction:
		return r.Feature.Module
	}
	return r.Create.Module
}

// RecordID is the record a patch or a feature run writes ("" for a create).
func (r WriteRequest) RecordID() string {
	switch r.Kind {
	case KindPatch:
		return r.Patch.RecordID
	case KindAction:
		return r.Feature.RecordID
	}
	return ""
}

// Operation is the request's operation (SPEC §4.1).
func (r WriteRequest) Operation() string {
	switch r.Kind {
	case KindPatch:
		return OpPatch(r.Patch.Module, r.Patch.RecordID)
	case KindAction:
		return OpFeature(r.Feature.Module, r.Feature.RecordID, r.Feature.FeatureID)
	}
	return OpCreate(r.Create.Module)
}

// WithKey is the same request under another key.
func (r WriteRequest) WithKey(key string) WriteRequest {
	r.Create.Key, r.Patch.Key, r.Feature.Key = key, key, key
	return r
}

// WithOwner is the same request for another owner.
func (r WriteRequest) WithOwner(owner string) WriteRequest {
	r.Create.Owner, r.Patch.Owner, r.Feature.Owner = owner, owner, owner
	return r
}

// given is a JSON member as received: nil (not given) when it is empty or only whitespace.
func given(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	return raw
}

// NewCreate is a create as a door received it: summary and payload nil where they were not
// given. A create's defaults — no summary, the payload {} — are the same request sent or not
// (CreateBody leaves them out).
func NewCreate(owner, module, key, title string, summary *string, payload json.RawMessage) CreateInput {
	return CreateInput{Owner: owner, Module: module, Key: key, Title: title, Summary: summary, Payload: given(payload)}
}

// NewPatch is a patch as a door received it: each of title, summary and payload nil where it
// was not given (the record keeps it). Unlike a create's, a patch's "" summary and {} payload
// are changes: they clear the summary and empty the payload.
func NewPatch(owner, module, recordID, key string, expectRevision int, title, summary *string, payload json.RawMessage) PatchInput {
	return PatchInput{Owner: owner, Module: module, RecordID: recordID, Key: key, ExpectRevision: expectRevision,
		Title: title, Summary: summary, Payload: given(payload)}
}

// NewFeature is a feature run as a door received it: input nil where it was not given. No
// input and the input {} are the same request (FeatureBody leaves {} out).
func NewFeature(owner, module, recordID, featureID, key string, input json.RawMessage) FeatureInput {
	return FeatureInput{Owner: owner, Module: module, RecordID: recordID, FeatureID: featureID, Key: key, Input: given(input)}
}

// Fields are a write as the workbench's form and Storm hold it: each body field as its text
// field reads (nil: the field is not offered, or holds nothing to send).
type Fields struct {
	Kind                                    string
	Owner, Module, RecordID, FeatureID, Key string
	ExpectRevision                          int
	Title, Summary, Payload, Input          *string
	// Base is the record a patch's fields were prefilled from (nil: none was read). A field the
	// user left at the base's value is not sent, as a CLI flag left out is not: the form shows
	// the record's values as its defaults.
	Base *Record
}

// Request is the write the fields say, built as NewCreate, NewPatch and NewFeature build the
// CLI's and HTTP's: an empty create summary, payload or input is not given; an empty patch
// title is not given (a title cannot be empty), and a patch field equal to the base's value is
// not given either.
func (f Fields) Request() WriteRequest {
	text := func(p *string) *string {
		if p == nil || *p == "" {
			return nil
		}
		return p
	}
	raw := func(p *string) json.RawMessage {
		if p == nil {
			return nil
		}
		return given(json.RawMessage(*p))
	}
	switch f.Kind {
	case KindPatch:
		title, summary, payload := text(f.Title), f.Summary, raw(f.Payload)
		if b := f.Base; b != nil {
			if title != nil && *title == b.Title {
				title = nil
			}
			if summary != nil && *summary == b.Summary {
				summary = nil
			}
			if payload != nil && sameJSON(payload, b.Payload) {
				payload = nil
			}
		} else if summary != nil && *summary == "" {
			summary = nil // no record read: an empty field is one nobody typed into
		}
		return WriteRequest{Kind: KindPatch, Patch: NewPatch(f.Owner, f.Module, f.RecordID, f.Key, f.ExpectRevision, title, summary, payload)}
	case KindAction:
		return WriteRequest{Kind: KindAction, Feature: NewFeature(f.Owner, f.Module, f.RecordID, f.FeatureID, f.Key, raw(f.Input))}
	}
	title := ""
	if f.Title != nil {
		title = *f.Title
	}
	return WriteRequest{Kind: KindCreate, Create: NewCreate(f.Owner, f.Module, f.Key, title, text(f.Summary), raw(f.Payload))}
}

// sameJSON reports whether two JSON texts are one value (both canonical-equal); text that does
// not pass the boundary is never the same.
func sameJSON(a, b json.RawMessage) bool {
	ca, err := CanonicalObject("payload", a)
	if err != nil {
		return false
	}
	cb, err := CanonicalObject("payload", b)
	return err == nil && bytes.Equal(ca, cb)
}

// The canonical bodies the kernel fingerprints (SPEC §6): jsonb text of the members given. A
// payload or input passed here is already canonical (CanonicalObject).

// emptyObject is the canonical text of {}.
const emptyObject = "{}"

// CreateBody is a create's canonical body. The create's defaults are left out — a summary ""
// and a payload {} — so a request that spells them and one that does not are one request.
func CreateBody(title string, summary *string, payload json.RawMessage) []byte {
	if summary != nil && *summary == "" {
		summary = nil
	}
	if string(payload) == emptyObject {
		payload = nil
	}
	return jsonb.AppendObject(nil, jsonb.Member{Name: "title", Value: jsonb.AppendString(nil, title)},
		jsonb.Member{Name: "summary", Value: textValue(summary)}, jsonb.Member{Name: "payload", Value: payload})
}

// CreateBodyAsSent is a create's body as the kernel encoded it before defaults were left out:
// every member given, as given. It differs from CreateBody only for a request that spelled a
// default (nil otherwise); a key stored then holds its fingerprint.
func CreateBodyAsSent(title string, summary *string, payload json.RawMessage) []byte {
	if (summary == nil || *summary != "") && string(payload) != emptyObject {
		return nil
	}
	return jsonb.AppendObject(nil, jsonb.Member{Name: "title", Value: jsonb.AppendString(nil, title)},
		jsonb.Member{Name: "summary", Value: textValue(summary)}, jsonb.Member{Name: "payload", Value: payload})
}

// PatchBody is a patch's canonical body: every member given, as given (a patch has no defaults:
// "" and {} change the record).
func PatchBody(expectRevision int, title, summary *string, payload json.RawMessage) []byte {
	return jsonb.AppendObject(nil, jsonb.Member{Name: "expectRevision", Value: strconv.AppendInt(nil, int64(expectRevision), 10)},
		jsonb.Member{Name: "title", Value: textValue(title)}, jsonb.Member{Name: "summary", Value: textValue(summary)},
		jsonb.Member{Name: "payload", Value: payload})
}

// FeatureBody is a feature run's canonical body; the input {} is the default and left out.
func FeatureBody(input json.RawMessage) []byte {
	if string(input) == emptyObject {
		input = nil
	}
	return jsonb.AppendObject(nil, jsonb.Member{Name: "input", Value: input})
}

// FeatureBodyAsSent is a feature run's body as encoded before the input {} was left out, or
// nil when that is FeatureBody.
func FeatureBodyAsSent(input json.RawMessage) []byte {
	if string(input) != emptyObject {
		return nil
	}
	return jsonb.AppendObject(nil, jsonb.Member{Name: "input", Value: input})
}

func textValue(s *string) []byte {
	if s == nil {
		return nil
	}
	return jsonb.AppendString(nil, *s)
}

// CommandLine is the request as an `idemwork` command, flag by flag: the CLI sends the same body
// (a retry from the shell replays what the form or the storm wrote). A create's and a feature
// run's defaults are left out, as the body leaves them out. Values are quoted for a POSIX shell.
func (r WriteRequest) CommandLine() string {
	var b strings.Builder
	flag := func(name, v string) { b.WriteString(" --" + name + " " + shellQuote(v)) }
	opt := func(name string, v *string) {
		if v != nil {
			flag(name, *v)
		}
	}
	raw := func(name string, v json.RawMessage, isDefault bool) {
		if v != nil && !isDefault {
			flag(name, string(v))
		}
	}
	empty := func(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == emptyObject }
	key := func(k string) {
		if k != "" {
			flag("key", k)
		}
	}
	switch r.Kind {
	case KindPatch:
		in := r.Patch
		b.WriteString("idemwork patch")
		flag("owner", in.Owner)
		flag("module", in.Module)
		flag("record", in.RecordID)
		flag("expect-revision", strconv.Itoa(in.ExpectRevision))
		key(in.Key)
		opt("title", in.Title)
		opt("summary", in.Summary)
		raw("payload", in.Payload, false)
	case KindAction:
		in := r.Feature
		b.WriteString("idemwork action")
		flag("owner", in.Owner)
		flag("module", in.Module)
		flag("record", in.RecordID)
		flag("feature", in.FeatureID)
		key(in.Key)
		raw("input", in.Input, empty(in.Input))
	default:
		in := r.Create
		b.WriteString("idemwork create")
		flag("owner", in.Owner)
		flag("module", in.Module)
		key(in.Key)
		flag("title", in.Title)
		if in.Summary != nil && *in.Summary != "" {
			flag("summary", *in.Summary)
		}
		raw("payload", in.Payload, empty(in.Payload))
	}
	return b.String()
}

// shellQuote quotes s for a POSIX shell: as it is when it needs no quoting, else in single
// quotes (a single quote inside as '\”).
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:@/+=,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
