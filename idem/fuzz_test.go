package idem_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
)

// recordingPolicy accepts whatever reaches Restore and keeps it, so the fuzz target can check
// that only whitelisted results ever get that far.
type recordingPolicy struct{ got *json.RawMessage }

func (recordingPolicy) Name() string     { return "record-snapshot-reference-v1" }
func (recordingPolicy) Fields() []string { return []string{"recordId", "revision"} }
func (recordingPolicy) Serialize(v string) (json.RawMessage, error) {
	return json.RawMessage(v), nil
}
func (p recordingPolicy) Restore(_ context.Context, _, _ string, result json.RawMessage) (string, error) {
	*p.got = result
	return string(result), nil
}

// FuzzParseEnvelope: parsing and restoring a stored envelope never panics; a parsed (non-legacy)
// envelope has only schemaVersion, policy and result with version 1; and a result handed to a
// policy's Restore holds exactly the policy's whitelisted fields, each a short id or an integer.
func FuzzParseEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"01J0ABC","revision":2}}`,
		`{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"01J0ABC","revision":2,"title":"x"}}`,
		`{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"01J0ABC","revision":2},"token":"x"}`,
		`{"schemaVersion":2,"policy":"p","result":{}}`,
		`{"policy":"raw-json-v1","body":{"password":"x"}}`,
		`{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"a","revision":1,"recordId":"b"}}`,
		`{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"a","Revision":1}}`,
		`{"schemaVersion":1.0,"policy":"record-snapshot-reference-v1","result":{"recordId":"a","revision":1}}`,
		`null`, `[]`, `{`, ``, `"x"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		env, err := idemtype.ParseEnvelope(raw)
		if err == nil && !env.Legacy {
			var top map[string]json.RawMessage
			if json.Unmarshal(raw, &top) != nil {
				t.Fatalf("accepted a non-object %q", raw)
			}
			for k := range top {
				if k != "schemaVersion" && k != "policy" && k != "result" {
					t.Fatalf("accepted top-level field %q in %q", k, raw)
				}
			}
			if env.SchemaVersion != 1 || env.Policy == "" {
				t.Fatalf("accepted version %d policy %q", env.SchemaVersion, env.Policy)
			}
		}
		var got json.RawMessage
		_, err = idem.RestoreEnvelope(context.Background(), idem.ResultPolicy[string](recordingPolicy{&got}), "alice", "NOTE", raw)
		if err != nil {
			if c := apperr.CodeOf(err); c != apperr.SnapshotIntegrity && c != apperr.PolicyMismatch {
				t.Fatalf("restore failed with %s, not a fail-closed code: %v", c, err)
			}
			if got != nil {
				t.Fatalf("Restore ran although restoring failed: %v", err)
			}
			return
		}
		var result map[string]json.RawMessage
		if json.Unmarshal(got, &result) != nil || len(result) != 2 {
			t.Fatalf("Restore received %q", got)
		}
		var id string
		if json.Unmarshal(result["recordId"], &id) != nil || id == "" || len(id) > 64 || strings.ContainsAny(id, " /\"\\\x00") {
			t.Fatalf("Restore received recordId %s", result["recordId"])
		}
		var rev uint64
		if json.Unmarshal(result["revision"], &rev) != nil {
			t.Fatalf("Restore received revision %s", result["revision"])
		}
	})
}
