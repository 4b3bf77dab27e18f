package kernel

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
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
