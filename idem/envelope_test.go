package idem_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
)

// forbiddenFields are the things SPEC §5 says never enter an envelope.
var forbiddenFields = []string{"title", "summary", "payload", "snapshot", "input", "output", "originalContent", "currentContent",
	"cookie", "token", "authorization", "connectionString", "providerResponse", "privateKey",
	// the same secrets under other spellings: the guard is a whitelist, not a blacklist
	"Authorization", "set-cookie", "accessToken", "password", "dsn", "connection_string", "provider_response", "private_key"}

var recordFields = []string{"recordId", "revision"}

func TestBuildEnvelopeWritesExactlyTheSpecShape(t *testing.T) {
	t.Parallel()
	env, err := idem.BuildEnvelope("record-snapshot-reference-v1", recordFields, json.RawMessage(`{ "recordId" : "01J0ABC", "revision" : 2 }`))
	require.NoError(t, err)
	// The canonical form: jsonb's own text of the envelope, so the stored row reads back as written.
	require.Equal(t, `{"policy": "record-snapshot-reference-v1", "result": {"recordId": "01J0ABC", "revision": 2}, "schemaVersion": 1}`, string(env))
}

func TestBuildEnvelopeRejectsEveryForbiddenField(t *testing.T) {
	t.Parallel()
	for _, field := range forbiddenFields {
		for _, value := range []string{`"x"`, `{"nested":"x"}`, `1`} {
			result := `{"recordId":"01J0ABC","revision":2,"` + field + `":` + value + `}`
			env, err := idem.BuildEnvelope("record-snapshot-reference-v1", recordFields, json.RawMessage(result))
			ae := requireCode(t, err, apperr.Internal)
			require.Nil(t, env)
			require.Contains(t, ae.Message, field, "the guard names what it refused")
		}
	}
}

func TestBuildEnvelopeRejectsAnythingButShortIdsAndNonNegativeIntegers(t *testing.T) {
	t.Parallel()
	for name, result := range map[string]string{
		"missing field":        `{"recordId":"01J0ABC"}`,
		"not an object":        `["01J0ABC",2]`,
		"null":                 `null`,
		"nested object id":     `{"recordId":{"id":"01J0ABC"},"revision":2}`,
		"array value":          `{"recordId":"01J0ABC","revision":[2]}`,
		"negative revision":    `{"recordId":"01J0ABC","revision":-2}`,
		"fractional revision":  `{"recordId":"01J0ABC","revision":2.5}`,
		"exponent revision":    `{"recordId":"01J0ABC","revision":2e3}`,
		"huge revision":        `{"recordId":"01J0ABC","revision":12345678901}`,
		"boolean":              `{"recordId":true,"revision":2}`,
		"id with spaces":       `{"recordId":"my secret title","revision":2}`,
		"id too long":          `{"recordId":"` + strings.Repeat("a", 65) + `","revision":2}`,
		"empty id":             `{"recordId":"","revision":2}`,
		"id with a slash":      `{"recordId":"a/b","revision":2}`,
		"id with a NUL escape": `{"recordId":"a\u0000","revision":2}`,
		"case-variant extra":   `{"recordId":"a","revision":2,"RecordId":"b"}`,
	} {
		_, err := idem.BuildEnvelope("record-snapshot-reference-v1", recordFields, json.RawMessage(result))
		require.Equal(t, apperr.Internal, apperr.CodeOf(err), "%s: %v", name, err)
	}
	_, err := idem.BuildEnvelope("record-snapshot-reference-v1", recordFields, json.RawMessage(`{"recordId":"`+strings.Repeat("a", 64)+`","revision":4294967295}`))
	require.NoError(t, err, "64-character ids and 10-digit integers are references")
	_, err = idem.BuildEnvelope(idemtype.LegacyPolicy, recordFields, json.RawMessage(`{"recordId":"a","revision":1}`))
	requireCode(t, err, apperr.Internal)
}

func TestParseEnvelopeIsStrictAndReadsLegacyReceiptsAsLegacy(t *testing.T) {
	t.Parallel()
	ok := `{"schemaVersion":1,"policy":"p","result":{"recordId":"a","revision":1}}`
	env, err := idemtype.ParseEnvelope([]byte(ok))
	require.NoError(t, err)
	require.Equal(t, "p", env.Policy)
	require.False(t, env.Legacy)

	for name, raw := range map[string]string{
		"not JSON":          `{`,
		"array":             `[]`,
		"null":              `null`,
		"version 2":         `{"schemaVersion":2,"policy":"p","result":{}}`,
		"no version":        `{"policy":"p","result":{}}`,
		"no policy":         `{"schemaVersion":1,"result":{}}`,
		"no result":         `{"schemaVersion":1,"policy":"p"}`,
		"policy not string": `{"schemaVersion":1,"policy":7,"result":{}}`,
		"extra field":       `{"schemaVersion":1,"policy":"p","result":{},"title":"x"}`,
		"case variant":      `{"schemaVersion":1,"policy":"p","result":{},"Result":{}}`,
	} {
		_, err := idemtype.ParseEnvelope([]byte(raw))
		require.Equal(t, apperr.SnapshotIntegrity, apperr.CodeOf(err), "%s: %v", name, err)
	}
	for _, field := range forbiddenFields {
		_, err := idemtype.ParseEnvelope([]byte(`{"schemaVersion":1,"policy":"p","result":{},"` + field + `":"x"}`))
		ae := requireCode(t, err, apperr.SnapshotIntegrity)
		require.Contains(t, ae.Message, field)
	}

	legacy, err := idemtype.ParseEnvelope([]byte(`{"policy":"raw-json-v1","body":{"anything":"goes"}}`))
	require.NoError(t, err)
	require.True(t, legacy.Legacy)
	require.Equal(t, idemtype.LegacyPolicy, legacy.Policy)
}

func TestRestoreEnvelopeFailsClosedOnAForeignPolicyOrAResultOutsideTheWhitelist(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.exec(t, `INSERT INTO widget VALUES ('alice', 'w1', 'W', 'label')`)
	good := `{"schemaVersion":1,"policy":"widget-reference-v1","result":{"widgetId":"w1"}}`
	w, err := idem.RestoreEnvelope(ctx, idem.ResultPolicy[widget](b.policy), "alice", "W", []byte(good))
	require.NoError(t, err)
	require.Equal(t, widget{ID: "w1", Owner: "alice", Module: "W", Label: "label"}, w)

	_, err = idem.RestoreEnvelope(ctx, idem.ResultPolicy[widget](b.policy), "bob", "W", []byte(good))
	requireCode(t, err, apperr.SnapshotIntegrity) // another owner cannot reach alice's widget
	_, err = idem.RestoreEnvelope(ctx, idem.ResultPolicy[widget](b.policy), "alice", "OTHER", []byte(good))
	requireCode(t, err, apperr.SnapshotIntegrity) // nor another module

	_, err = idem.RestoreEnvelope(ctx, idem.ResultPolicy[widget](b.policy), "alice", "W",
		[]byte(`{"schemaVersion":1,"policy":"widget-reference-v0","result":{"widgetId":"w1"}}`))
	requireCode(t, err, apperr.PolicyMismatch)
	_, err = idem.RestoreEnvelope(ctx, idem.ResultPolicy[widget](b.policy), "alice", "W",
		[]byte(`{"policy":"raw-json-v1","body":{"widgetId":"w1"}}`))
	requireCode(t, err, apperr.PolicyMismatch)
	for _, field := range forbiddenFields {
		_, err = idem.RestoreEnvelope(ctx, idem.ResultPolicy[widget](b.policy), "alice", "W",
			[]byte(`{"schemaVersion":1,"policy":"widget-reference-v1","result":{"widgetId":"w1","`+field+`":"x"}}`))
		ae := requireCode(t, err, apperr.SnapshotIntegrity)
		require.Contains(t, ae.Message, field)
	}
	require.Equal(t, int32(3), b.restores.Load(), "the policy's Restore ran only for the three envelopes that passed the guard")
}

func TestAStoredEnvelopeTamperedWithAForbiddenFieldFailsClosedOnReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	first, err := b.run(ctx, idem.Request{Owner: "alice", Key: "k"}, "l")
	require.NoError(t, err)
	for _, field := range forbiddenFields {
		for _, where := range []string{"{result," + field + "}", "{" + field + "}"} {
			b.exec(t, `UPDATE idem.idempotency_record SET response = jsonb_set(response, $1::text[], '"leak"') WHERE idempotency_key = 'k'`, where)
			_, err := b.run(ctx, idem.Request{Owner: "alice", Key: "k"}, "l")
			ae := requireCode(t, err, apperr.SnapshotIntegrity)
			require.Contains(t, ae.Message, field)
			b.exec(t, `UPDATE idem.idempotency_record SET response = $1 WHERE idempotency_key = 'k'`, string(first.Envelope))
		}
	}
	again, err := b.run(ctx, idem.Request{Owner: "alice", Key: "k"}, "l")
	require.NoError(t, err)
	require.Equal(t, first.Value, again.Value)
	require.Equal(t, int32(1), b.works.Load())
}

func TestAReplayReturnsTheEnvelopeByteForByteAsTheFirstCallDid(t *testing.T) {
	t.Parallel()
	stored := []byte(`{"policy": "p", "result": {"revision": 2, "recordId": "r1"}, "schemaVersion": 1}`)
	written, err := idem.BuildEnvelope("p", []string{"recordId", "revision"}, []byte(`{"recordId":"r1","revision":2}`))
	require.NoError(t, err)
	require.Equal(t, string(written), string(idem.CanonicalEnvelope(stored)))
	require.Equal(t, `{"policy": "p", "result": {"recordId": "r1", "revision": 2}, "schemaVersion": 1}`, string(written))
}
