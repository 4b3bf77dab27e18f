package kernel

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/model"
)

// The former allocation-free reference scanner (refscan.go) is gone; its differential test
// stays: on every reference the envelope guard lets through, reading it gives exactly what
// json.Unmarshal gives.
func TestReferencesReadAsJSONUnmarshalReadsThem(t *testing.T) {
	for _, raw := range []string{
		`{"recordId": "01JABC", "revision": 2}`, `{"revision":7,"recordId":"r-1"}`,
		`{"recordId": "01JABC", "revision": 2, "executionId": "01JEXE"}`, `{"executionId":"e","recordId":"r","revision":0}`,
		`{"recordId":"a","reviewId":"01JREV"}`, `{ "revision" : 999999999 , "recordId" : "x:y.z_w-1" }`,
	} {
		var r1, r2 recordRef
		require.NoError(t, decodeRecordRef([]byte(raw), &r1))
		require.NoError(t, json.Unmarshal([]byte(raw), &r2))
		require.Equal(t, r2, r1, raw)
		var x1, x2 executionRef
		require.NoError(t, decodeExecutionRef([]byte(raw), &x1))
		require.NoError(t, json.Unmarshal([]byte(raw), &x2))
		require.Equal(t, x2, x1, raw)
		var v1, v2 reviewRef
		require.NoError(t, decodeReviewRef([]byte(raw), &v1))
		require.NoError(t, json.Unmarshal([]byte(raw), &v2))
		require.Equal(t, v2, v1, raw)
	}
}

// The former marshalDetail fast path wrote json.Marshal's bytes; the detail is now canonical
// (what jsonb stores), and these are its known answers.
func TestAuditDetailsAreCanonical(t *testing.T) {
	require.Equal(t, `{"operation": "NOTE:record:create"}`, string(auditDetail("operation", "NOTE:record:create")))
	require.Equal(t, `{"mode": "internal", "status": "SUCCEEDED", "featureId": "F01", "operation": "NOTE:record:R:feature:F01"}`,
		string(auditDetail("operation", "NOTE:record:R:feature:F01", "featureId", "F01", "mode", "internal", "status", "SUCCEEDED")))
}

// decodeSnapshot agrees with encoding/json (DisallowUnknownFields) wherever it decodes, and
// declines (so checkSnapshot falls back to encoding/json) wherever they could differ.
func TestTheFastSnapshotDecoderAgreesWithEncodingJSON(t *testing.T) {
	for _, raw := range []string{
		`{"id": "R", "ownerId": "o", "moduleCode": "NOTE", "revision": 2, "title": "t", "summary": "", "payload": {"a": [1, 2.50, null, "x"]}, "createdAt": "2026-01-02T03:04:05.123456Z", "updatedAt": "2026-01-02T03:04:05Z"}`,
		`{"id": "R\u00e9\ud834\udd1e\"\\", "ownerId": "o", "moduleCode": "MEM-001", "revision": 1, "title": "\u2028 \t", "summary": "a\nb", "payload": {}, "createdAt": "2026-01-02T03:04:05+02:00", "updatedAt": null}`,
		`{"id": "R", "payload": null}`,
		`{"ID": "R"}`,
		`{"id": null}`,
		`{"id": "R", "extra": 1}`,
		`{"id": "R", "id": "S"}`,
		`{"revision": 1.5}`,
		`{"revision": 1e2}`,
		`{"createdAt": "not a time"}`,
		`{"createdAt": "2026-13-02T03:04:05Z"}`,
		`[]`,
		`{"id": "R"} {}`,
	} {
		fast, ok := decodeSnapshot([]byte(raw))
		var slow model.Record
		dec := json.NewDecoder(bytesReader([]byte(raw)))
		dec.DisallowUnknownFields()
		err := dec.Decode(&slow)
		if ok {
			require.NoError(t, err, raw)
			require.Equal(t, slow, fast, raw)
		}
	}
	_, ok := decodeSnapshot([]byte(`{"id": "R", "ownerId": "o", "moduleCode": "NOTE", "revision": 2, "title": "t", "summary": "", "payload": {}, "createdAt": "2026-01-02T03:04:05Z", "updatedAt": "2026-01-02T03:04:05Z"}`))
	require.True(t, ok, "the kernel's own snapshots take the fast path")
}
