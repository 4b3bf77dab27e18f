package idem

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"idemwork/apperr"
)

// SchemaVersion is the only envelope version this runner writes.
const SchemaVersion = 1

// LegacyPolicy names pre-envelope receipts: readable for display, never written, never restored.
const LegacyPolicy = "raw-json-v1"

// ResultPolicy turns a business result into the minimal reference stored in an envelope and
// back. A changed Name means changed restore semantics: a stored name that differs from the
// operation's policy fails closed. Fields is the whitelist of result fields; anything else in
// an envelope is rejected on write and on read.
type ResultPolicy[T any] interface {
	Name() string
	Fields() []string
	Serialize(v T) (json.RawMessage, error)
	// Restore rebuilds the exact first result, reading only inside owner and module.
	Restore(ctx context.Context, owner, module string, result json.RawMessage) (T, error)
}

// Prefetcher is an optional capability of a ResultPolicy: it reads the rows Restore would read
// in the same statement as the key row (a replay in one round trip), then restores from them.
// Restore stays the reference: every check still runs in Go, and whenever the prefetched rows
// are absent or do not match the stored result exactly, the runner calls Restore, which fails
// closed as it always does.
type Prefetcher[T any] interface {
	// PrefetchSQL returns select-list columns and LEFT JOIN clauses added to the key read. The
	// key row is aliased k; $1 is the owner and $3 the route's module. The joins must never fail
	// on a malformed stored result (they simply find nothing).
	PrefetchSQL() (columns, joins string)
	// NewPrefetch returns scan destinations for the columns and the function that restores from
	// them once scanned; it reports false to fall back to Restore.
	NewPrefetch() (dest []any, restore func(owner, module string, result json.RawMessage) (T, bool, error))
}

// Envelope is idempotency_record.response.
type Envelope struct {
	SchemaVersion int             `json:"schemaVersion"`
	Policy        string          `json:"policy"`
	Result        json.RawMessage `json:"result"`
	// Legacy marks a raw-json-v1 receipt; its Result is the whole stored document.
	Legacy bool `json:"-"`
}

const maxRefString = 64

// guardResult checks that result is a flat object with exactly the policy's fields, each a short
// identifier string or a non-negative integer: a whitelist, so a title, payload, snapshot,
// content or secret can never ride along.
func guardResult(policy string, fields []string, result json.RawMessage) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(result, &m); err != nil || m == nil {
		return apperr.New(apperr.Internal, "envelope guard: %s result is not a JSON object", policy)
	}
	allowed := make(map[string]bool, len(fields))
	for _, f := range fields {
		allowed[f] = true
		if _, ok := m[f]; !ok {
			return apperr.New(apperr.Internal, "envelope guard: %s result lacks %q", policy, f)
		}
	}
	var extra []string
	for k := range m {
		if !allowed[k] {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return apperr.New(apperr.Internal, "envelope guard: %s result carries fields outside its whitelist: %s", policy, strings.Join(extra, ", "))
	}
	for k, v := range m {
		if !isRefValue(v) {
			return apperr.New(apperr.Internal, "envelope guard: %s field %q must be an id (string of at most %d id characters) or a non-negative integer", policy, k, maxRefString)
		}
	}
	return nil
}

func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if !plainByte(s[i]) {
			return false
		}
	}
	return true
}

func isRefValue(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return false
	}
	if v[0] == '"' {
		var s string
		if json.Unmarshal(v, &s) != nil || len(s) == 0 || len(s) > maxRefString {
			return false
		}
		for i := 0; i < len(s); i++ {
			c := s[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == ':' || c == '.') {
				return false
			}
		}
		return true
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(v) <= 10
}

// BuildEnvelope serialises the envelope of a new success, failing closed when the policy's
// result is not exactly its whitelist.
func BuildEnvelope(policy string, fields []string, result json.RawMessage) (json.RawMessage, error) {
	if policy == LegacyPolicy {
		return nil, apperr.New(apperr.Internal, "envelope guard: %s is read-only and is never written", LegacyPolicy)
	}
	var o flatObject
	if end, ok := scanFlat(result, skipWS(result, 0), &o); ok && skipWS(result, end) == len(result) &&
		o.guardOK(result, fields) && plainString(policy) {
		out := make([]byte, 0, len(`{"schemaVersion":1,"policy":"","result":}`)+len(policy)+len(result))
		out = append(out, `{"schemaVersion":1,"policy":"`...)
		out = append(out, policy...)
		out = append(out, `","result":`...)
		out = o.appendCompact(out, result)
		return append(out, '}'), nil
	}
	if err := guardResult(policy, fields, result); err != nil {
		return nil, err
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, result); err != nil {
		return nil, err
	}
	return json.Marshal(Envelope{SchemaVersion: SchemaVersion, Policy: policy, Result: compact.Bytes()})
}

// CanonicalEnvelope renders an envelope with its keys sorted and no spaces. jsonb hands a stored
// envelope back in its own key order, so without this a replay's envelope would differ byte for
// byte from the one the first request returned. Input that is not JSON is returned as it is.
func CanonicalEnvelope(raw []byte) json.RawMessage {
	var e scannedEnvelope
	if scanEnvelope(raw, &e) {
		return e.canonical(raw)
	}
	return canonicalEnvelopeJSON(raw)
}

// canonicalEnvelopeJSON is CanonicalEnvelope by decoding and re-encoding: the reference, used
// for every envelope scanEnvelope does not read.
func canonicalEnvelopeJSON(raw []byte) json.RawMessage {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return raw
	}
	out, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return out
}

// ParseEnvelope reads a stored envelope strictly: exactly schemaVersion, policy and result, with
// version 1; a raw-json-v1 document is returned as Legacy. Anything else is an integrity error.
func ParseEnvelope(raw []byte) (Envelope, error) {
	var e scannedEnvelope
	if scanEnvelope(raw, &e) {
		return Envelope{SchemaVersion: SchemaVersion, Policy: string(raw[e.policy.a:e.policy.b]),
			Result: bytes.Clone(raw[e.result.span.a:e.result.span.b])}, nil
	}
	return parseEnvelopeJSON(raw)
}

// parseEnvelopeJSON is ParseEnvelope with encoding/json: the reference, used for every envelope
// scanEnvelope does not read.
func parseEnvelopeJSON(raw []byte) (Envelope, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return Envelope{}, apperr.New(apperr.SnapshotIntegrity, "stored envelope is not a JSON object")
	}
	var policy string
	if p, ok := m["policy"]; ok {
		if err := json.Unmarshal(p, &policy); err != nil {
			return Envelope{}, apperr.New(apperr.SnapshotIntegrity, "stored envelope policy is not a string")
		}
	}
	if policy == LegacyPolicy {
		return Envelope{Policy: LegacyPolicy, Result: json.RawMessage(raw), Legacy: true}, nil
	}
	for k := range m {
		if k != "schemaVersion" && k != "policy" && k != "result" {
			return Envelope{}, apperr.New(apperr.SnapshotIntegrity, "stored envelope carries an unknown field %q", k)
		}
	}
	var env Envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return Envelope{}, apperr.New(apperr.SnapshotIntegrity, "stored envelope is malformed: %v", err)
	}
	if env.SchemaVersion != SchemaVersion {
		return Envelope{}, apperr.New(apperr.SnapshotIntegrity, "stored envelope has schemaVersion %d; this runner reads %d", env.SchemaVersion, SchemaVersion)
	}
	if env.Policy == "" || len(env.Result) == 0 {
		return Envelope{}, apperr.New(apperr.SnapshotIntegrity, "stored envelope lacks policy or result")
	}
	return env, nil
}

// RestoreEnvelope checks a stored envelope against the operation's policy and restores the
// exact first result: a different policy name fails closed with IDEMPOTENCY_POLICY_MISMATCH, and
// a result outside the policy's whitelist with SNAPSHOT_INTEGRITY_VIOLATION.
func RestoreEnvelope[T any](ctx context.Context, policy ResultPolicy[T], owner, module string, raw []byte) (T, error) {
	return restoreEnvelope(ctx, policy, owner, module, raw, nil)
}

// restoreEnvelope is RestoreEnvelope that first tries pre (rows prefetched with the key), when
// set, and falls back to the policy's Restore when pre reports false.
func restoreEnvelope[T any](ctx context.Context, policy ResultPolicy[T], owner, module string, raw []byte,
	pre func(owner, module string, result json.RawMessage) (T, bool, error)) (T, error) {
	var zero T
	var result json.RawMessage
	var e scannedEnvelope
	if scanEnvelope(raw, &e) && string(raw[e.policy.a:e.policy.b]) == policy.Name() && e.result.guardOK(raw, policy.Fields()) {
		// The plain form of a valid envelope: what the checks below accept, read without json.
		result = bytes.Clone(raw[e.result.span.a:e.result.span.b])
	} else {
		env, err := parseEnvelopeJSON(raw)
		if err != nil {
			return zero, err
		}
		if env.Policy != policy.Name() {
			return zero, apperr.New(apperr.PolicyMismatch, "the stored result was written by policy %q but this operation restores with %q; refusing to guess", env.Policy, policy.Name())
		}
		if err := guardResult(env.Policy, policy.Fields(), env.Result); err != nil {
			return zero, apperr.New(apperr.SnapshotIntegrity, "stored envelope: %s", strings.TrimPrefix(apperr.As(err).Message, "envelope guard: "))
		}
		result = env.Result
	}
	if pre != nil {
		v, ok, err := pre(owner, module, result)
		if err != nil {
			return zero, fmt.Errorf("restore %s: %w", policy.Name(), err)
		}
		if ok {
			return v, nil
		}
	}
	v, err := policy.Restore(ctx, owner, module, result)
	if err != nil {
		return zero, fmt.Errorf("restore %s: %w", policy.Name(), err)
	}
	return v, nil
}
