package idem

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/jsonb"
)

// ResultPolicy turns a call's result into the minimal reference stored in the key's envelope, and
// back (SPEC §5). Serialize writes the reference — ids and numbers only, exactly the Fields
// whitelist, never a title, body, snapshot or secret: anything else fails closed on write and on
// read. Restore rebuilds the exact first result from the service's own immutable rows, reading
// only inside owner and module, and checks what it returns (a row edited since fails closed).
// Name is the policy's name and version ("order-reference-v1"): a changed name means changed
// restore semantics, and a stored name that differs from the operation's policy fails closed
// (IDEMPOTENCY_POLICY_MISMATCH) rather than restore with the wrong rules.
type ResultPolicy[T any] interface {
	Name() string
	Fields() []string
	Serialize(v T) (json.RawMessage, error)
	Restore(ctx context.Context, owner, module string, result json.RawMessage) (T, error)
}

// Replayer is an optional capability of a ResultPolicy: the policy owns the whole statement of a
// replay. It reads the key row and the rows its result references in one statement (a replay in
// one round trip), and restores from them. Restore stays the reference: whenever the rows read
// are absent or do not match the stored result exactly, the replay's Restore function reports
// false and the runner calls the policy's Restore, which fails closed as it always does.
type Replayer[T any] interface {
	// ReadReplay reads the key row of p.Owner and p.Key from the runner's table (Runner.Table),
	// and what its result references inside p.Module, on q. It must never fail on a malformed
	// stored result (its joins simply find nothing).
	ReadReplay(ctx context.Context, q Querier, p ReplayParams) (Replay[T], error)
}

// ReplayParams names the key a replay reads and the route's module (rows are read only inside
// it).
type ReplayParams struct {
	Owner  string
	Key    string
	Module string
}

// StoredKey is the part of a key's row the runner decides on.
type StoredKey struct {
	Operation   string
	Fingerprint string
	Status      string
	Response    []byte // nil while PROCESSING
	ExpiresAt   time.Time
}

// Replay is what a Replayer read: the key row (Found false: the key has no row) and the function
// that restores a result from the rows read with it.
type Replay[T any] struct {
	Found bool
	Key   StoredKey
	// Restore restores result (the envelope's, already through the guard) from the rows read;
	// false falls back to the policy's Restore.
	Restore func(result json.RawMessage) (T, bool, error)
}

// ResultPath is where a stored envelope keeps member field of its policy's result, as a JSON path
// from the envelope's root: what a Replayer's one statement follows, on the server, from the key
// row to the rows the result references (store.ReplayRefs takes it). The envelope's layout is
// this package's; the result's members are the policy's.
func ResultPath(field string) []string { return []string{resultMember, field} }

// resultMember is the envelope member that holds the policy's result.
const resultMember = "result"

const maxRefString = 64

// guardResult checks that result is a flat object with exactly the policy's fields, each a short
// identifier string or a non-negative integer: a whitelist, so a title, payload, snapshot,
// content or secret can never ride along. It returns the result's canonical text.
func guardResult(policy string, fields []string, result []byte) (json.RawMessage, error) {
	return guard(policy, fields, result, true)
}

// guard is guardResult; with render false it only checks (a replay passes the stored text on).
func guard(policy string, fields []string, result []byte, render bool) (json.RawMessage, error) {
	bad := func(format string, args ...any) error {
		return apperr.New(apperr.Internal, "envelope guard: %s "+format, append([]any{policy}, args...)...)
	}
	r := refReader{raw: result, fields: fields}
	if err := jsonv2.Unmarshal(result, &r); err != nil {
		return nil, bad("result is not a JSON object without duplicate names")
	}
	if len(r.extra) > 0 {
		sort.Strings(r.extra)
		return nil, bad("result carries fields outside its whitelist: %s", strings.Join(r.extra, ", "))
	}
	for i, f := range fields {
		if i >= len(r.seen) || !r.seen[i] {
			return nil, bad("result lacks %q", f)
		}
	}
	if r.badField != "" {
		return nil, bad("field %q must be an id (string of at most %d id characters) or a non-negative integer", r.badField, maxRefString)
	}
	if !render {
		return result, nil
	}
	return jsonb.AppendObject(nil, r.members...), nil
}

// refReader reads a result's members through json v2's decoder (a duplicate name or invalid
// UTF-8 is an error): which of fields it has, which others, and each field's value as written.
type refReader struct {
	raw      []byte
	fields   []string
	seen     [8]bool
	extra    []string
	badField string
	buf      [8]jsonb.Member
	members  []jsonb.Member
}

var errNotAnObject = errors.New("not a JSON object")

// UnmarshalJSONFrom is json v2's hook: dec reads raw, the whole result.
func (r *refReader) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	r.members = r.buf[:0]
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return cmp.Or(err, errNotAnObject)
	}
	for dec.PeekKind() == '"' {
		quoted, err := dec.ReadValue()
		if err != nil {
			return err
		}
		name := quoted[1 : len(quoted)-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			if name, err = jsontext.AppendUnquote(nil, quoted); err != nil {
				return err
			}
		}
		i := slices.IndexFunc(r.fields, func(f string) bool { return f == string(name) }) // no copy
		extra := i < 0 || i >= len(r.seen)
		if extra {
			r.extra = append(r.extra, string(name)) // before the decoder reads on
		}
		switch v, err := dec.ReadValue(); {
		case err != nil:
			return err
		case extra:
		case !isRefValue(v):
			r.seen[i], r.badField = true, r.fields[i]
		default:
			end := int(dec.InputOffset()) // the value's bytes in raw: they stay after the next read
			r.seen[i] = true
			r.members = append(r.members, jsonb.Member{Name: r.fields[i], Value: r.raw[end-len(v) : end : end]})
		}
	}
	_, err := dec.ReadToken()
	return err
}

// isRefValue reports whether v is a reference value: a string of 1-64 id characters (no escapes)
// or a non-negative integer of at most 10 digits without leading zeros.
func isRefValue(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	if v[0] == '"' {
		s := v[1 : len(v)-1]
		if len(s) == 0 || len(s) > maxRefString {
			return false
		}
		for _, c := range s {
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
	return len(v) <= 10 && (len(v) == 1 || v[0] != '0')
}

// BuildEnvelope serialises the envelope of a new success in its canonical form (jsonb's text,
// so the stored row reads back byte for byte), failing closed when the policy's result is not
// exactly its whitelist.
func BuildEnvelope(policy string, fields []string, result json.RawMessage) (json.RawMessage, error) {
	if policy == idemtype.LegacyPolicy {
		return nil, apperr.New(apperr.Internal, "envelope guard: %s is read-only and is never written", idemtype.LegacyPolicy)
	}
	canon, err := guardResult(policy, fields, result)
	if err != nil {
		return nil, err
	}
	return jsonb.AppendObject(nil,
		jsonb.Member{Name: "policy", Value: jsonb.AppendString(nil, policy)},
		jsonb.Member{Name: resultMember, Value: canon},
		jsonb.Member{Name: "schemaVersion", Value: []byte(strconv.Itoa(idemtype.SchemaVersion))}), nil
}

// CanonicalEnvelope renders an envelope in the canonical form (jsonb's text): what a stored
// envelope reads back as. Input that is not JSON is returned as it is.
func CanonicalEnvelope(raw []byte) json.RawMessage {
	out, err := jsonb.Canonical(raw, jsonb.Limits{})
	if err != nil {
		return raw
	}
	return out
}

// RestoreEnvelope checks a stored envelope against the operation's policy and restores the
// exact first result: a different policy name fails closed with IDEMPOTENCY_POLICY_MISMATCH, and
// a result outside the policy's whitelist with SNAPSHOT_INTEGRITY_VIOLATION.
func RestoreEnvelope[T any](ctx context.Context, policy ResultPolicy[T], owner, module string, raw []byte) (T, error) {
	return restoreEnvelope(ctx, policy, owner, module, raw, nil)
}

// restoreEnvelope is RestoreEnvelope that first tries pre (rows read with the key), when set,
// and falls back to the policy's Restore when pre reports false.
func restoreEnvelope[T any](ctx context.Context, policy ResultPolicy[T], owner, module string, raw []byte,
	pre func(result json.RawMessage) (T, bool, error)) (T, error) {
	var zero T
	env, err := idemtype.ParseEnvelope(raw)
	if err != nil {
		return zero, err
	}
	if env.Policy != policy.Name() {
		return zero, apperr.New(apperr.PolicyMismatch, "the stored result was written by policy %q but this operation restores with %q; refusing to guess", env.Policy, policy.Name())
	}
	result, err := guard(env.Policy, policy.Fields(), env.Result, false)
	if err != nil {
		return zero, apperr.New(apperr.SnapshotIntegrity, "stored envelope: %s", strings.TrimPrefix(apperr.As(err).Message, "envelope guard: "))
	}
	if pre != nil {
		v, ok, err := pre(result)
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
