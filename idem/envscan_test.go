package idem

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"idemwork/apperr"
)

// The envelope readers and writers as they were before scanEnvelope: the oracles the fast
// paths are held to.

func oracleCanonicalEnvelope(raw []byte) json.RawMessage {
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

func oracleParseEnvelope(raw []byte) (Envelope, error) {
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

func oracleBuildEnvelope(policy string, fields []string, result json.RawMessage) (json.RawMessage, error) {
	if policy == LegacyPolicy {
		return nil, apperr.New(apperr.Internal, "envelope guard: %s is read-only and is never written", LegacyPolicy)
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

// oracleRestore is the old restoreEnvelope's checks; it returns the result handed on.
func oracleRestore(name string, fields []string, raw []byte) (json.RawMessage, error) {
	env, err := oracleParseEnvelope(raw)
	if err != nil {
		return nil, err
	}
	if env.Policy != name {
		return nil, apperr.New(apperr.PolicyMismatch, "the stored result was written by policy %q but this operation restores with %q; refusing to guess", env.Policy, name)
	}
	if err := guardResult(env.Policy, fields, env.Result); err != nil {
		return nil, apperr.New(apperr.SnapshotIntegrity, "stored envelope: %s", strings.TrimPrefix(apperr.As(err).Message, "envelope guard: "))
	}
	return env.Result, nil
}

// capturePolicy hands back whatever reaches Restore.
type capturePolicy struct {
	name   string
	fields []string
	got    *json.RawMessage
}

func (p capturePolicy) Name() string     { return p.name }
func (p capturePolicy) Fields() []string { return p.fields }
func (p capturePolicy) Serialize(string) (json.RawMessage, error) {
	return nil, nil
}
func (p capturePolicy) Restore(_ context.Context, _, _ string, result json.RawMessage) (string, error) {
	*p.got = result
	return "", nil
}

var envelopeSeeds = []string{
	`{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"01J0ABC","revision":2}}`,
	`{"policy": "record-snapshot-reference-v1", "result": {"revision": 2, "recordId": "01J0ABC"}, "schemaVersion": 1}`,
	`{"policy": "feature-execution-reference-v1", "result": {"recordId": "01JZ3W9Q8X4T6V2N1M0K7H5G3F", "revision": 2, "executionId": "01JZ3W9Q8X4T6V2N1M0K7H5G3G"}, "schemaVersion": 1}`,
	`{"policy": "commitment-review-reference-v2", "result": {"reviewId": "r-1", "recordId": "a:b.c_d"}, "schemaVersion": 1}`,
	`{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"01J0ABC","revision":2,"title":"x"}}`,
	`{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"01J0ABC","revision":2},"token":"x"}`,
	`{"schemaVersion":2,"policy":"p","result":{}}`,
	`{"schemaVersion":1,"policy":"p","result":{}}`,
	`{"schemaVersion":1,"policy":"","result":{"recordId":"a","revision":1}}`,
	`{"schemaVersion":1,"policy":"record-snapshot-reference-v1"}`,
	`{"policy":"raw-json-v1","body":{"password":"x"}}`,
	`{"schemaVersion":1,"policy":"raw-json-v1","result":{"recordId":"a","revision":1}}`,
	`{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"a","revision":1,"recordId":"b"}}`,
	`{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"a","Revision":1}}`,
	`{"schemaVersion":1.0,"policy":"record-snapshot-reference-v1","result":{"recordId":"a","revision":1}}`,
	`{"schemaVersion":01,"policy":"record-snapshot-reference-v1","result":{"recordId":"a","revision":1}}`,
	`{"schemaVersion":1,"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"a","revision":1}}`,
	`{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"a","revision":1}} x`,
	`{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"a","revision":1}}{}`,
	`{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"a<b","revision":1}}`,
	`{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"a b","revision":1}}`,
	`{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"\u0061","revision":1}}`,
	`{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"","revision":1}}`,
	`{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"a","revision":-1}}`,
	`{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"a","revision":12345678901}}`,
	`{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"a","revision":1e2}}`,
	`{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"` + strings.Repeat("a", 65) + `","revision":1}}`,
	`{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":1,"revision":"a"}}`,
	`{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"a","revision":{}}}`,
	`{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":[]}`,
	`{"Policy":"x","schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"a","revision":1}}`,
	"\t{ \"schemaVersion\" :1 ,\n\"policy\":\"record-snapshot-reference-v1\",\"result\":{ \"recordId\" : \"a\" , \"revision\" : 0 } }\r\n",
	`{"schemaVersion":1,"policy":"p","result":{" ":0,"0":0,"":0,"a!":1,"a":2}}`,
	`null`, `[]`, `{`, ``, `"x"`, `{}`, `{"a":1}`, `1`, ` `,
}

var guardCases = []struct {
	name   string
	fields []string
}{
	{"record-snapshot-reference-v1", []string{"recordId", "revision"}},
	{"feature-execution-reference-v1", []string{"recordId", "revision", "executionId"}},
	{"commitment-review-reference-v2", []string{"recordId", "reviewId"}},
	{"p", nil},
}

// fieldName is the %q field name in the two messages whose field depends on map order (the
// old readers report whichever offending field a map range meets first).
var fieldName = regexp.MustCompile(`field "(?:[^"\\]|\\.)*"`)

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	msg := err.Error()
	if strings.Contains(msg, "carries an unknown field") || strings.Contains(msg, "must be an id (string") {
		msg = fieldName.ReplaceAllString(msg, `field "…"`)
	}
	return fmt.Sprintf("%s|%s", apperr.CodeOf(err), msg)
}

// checkEnvelopeAgainstOracles compares every envelope fast path with its oracle on raw.
func checkEnvelopeAgainstOracles(t *testing.T, raw []byte) {
	t.Helper()
	if got, want := CanonicalEnvelope(raw), oracleCanonicalEnvelope(raw); !bytes.Equal(got, want) {
		t.Fatalf("CanonicalEnvelope(%q) = %q, oracle %q", raw, got, want)
	}
	env, err := ParseEnvelope(raw)
	wenv, werr := oracleParseEnvelope(raw)
	if errText(err) != errText(werr) || env.SchemaVersion != wenv.SchemaVersion || env.Policy != wenv.Policy ||
		env.Legacy != wenv.Legacy || !bytes.Equal(env.Result, wenv.Result) {
		t.Fatalf("ParseEnvelope(%q) = %+v, %v; oracle %+v, %v", raw, env, err, wenv, werr)
	}
	for _, c := range guardCases {
		var got json.RawMessage
		_, err := RestoreEnvelope(context.Background(), ResultPolicy[string](capturePolicy{c.name, c.fields, &got}), "alice", "NOTE", raw)
		want, werr := oracleRestore(c.name, c.fields, raw)
		if errText(err) != errText(werr) && !(werr == nil && err != nil && strings.HasPrefix(err.Error(), "restore ")) {
			t.Fatalf("RestoreEnvelope(%s, %q) = %v; oracle %v", c.name, raw, err, werr)
		}
		if werr == nil && !bytes.Equal(got, want) {
			t.Fatalf("RestoreEnvelope(%s, %q) handed on %q; oracle %q", c.name, raw, got, want)
		}
		// The same document as a result to build an envelope from.
		b, err := BuildEnvelope(c.name, c.fields, raw)
		wb, werr := oracleBuildEnvelope(c.name, c.fields, raw)
		if errText(err) != errText(werr) || !bytes.Equal(b, wb) {
			t.Fatalf("BuildEnvelope(%s, %q) = %q, %v; oracle %q, %v", c.name, raw, b, err, wb, werr)
		}
	}
}

var resultSeeds = []string{
	`{"recordId":"01J0ABC","revision":2}`, ` { "revision" : 2 , "recordId" : "x" } `,
	`{"recordId":"01JZ3W9Q8X4T6V2N1M0K7H5G3F","revision":2,"executionId":"01JZ3W9Q8X4T6V2N1M0K7H5G3G"}`,
	`{"recordId":"a","reviewId":"b"}`, `{"recordId":"a","revision":2,"x":1}`, `{"recordId":"a","revision":2}x`,
	`{"recordId":"a","recordId":"b"}`, `{"recordId":"a&b","revision":2}`, `{}`,
}

func TestEnvelopeFastPathsMatchOracles(t *testing.T) {
	for _, s := range append(append([]string{}, envelopeSeeds...), resultSeeds...) {
		checkEnvelopeAgainstOracles(t, []byte(s))
	}
	// The fast path really takes the common forms.
	var e scannedEnvelope
	if !scanEnvelope([]byte(envelopeSeeds[2]), &e) {
		t.Fatal("scanEnvelope refuses a jsonb-rendered envelope")
	}
}

// FuzzEnvelopeFastPath: CanonicalEnvelope, ParseEnvelope, RestoreEnvelope and BuildEnvelope give
// byte for byte what their encoding/json implementations (the oracles above) gave, errors
// included, on any input.
func FuzzEnvelopeFastPath(f *testing.F) {
	for _, s := range envelopeSeeds {
		f.Add([]byte(s))
	}
	for _, s := range resultSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkEnvelopeAgainstOracles(t, raw)
	})
}
