package storm

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/httpapi"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/storm/stormtypes"
	"github.com/idemwork/idemwork/wire"
)

// The storm's HTTP target is a client of the API's public contract and carries its own copy of
// the names it sends and reads; they are the server's.
func TestTheHTTPTargetSpeaksTheAPIsContract(t *testing.T) {
	require.Equal(t, idemtype.HeaderIdempotencyKey, headerIdempotencyKey)
	require.Equal(t, idemtype.HeaderWaited, headerWaited)
	require.Equal(t, httpapi.HeaderShare, headerShare)

	summary, title := "s", "t2"
	payload := json.RawMessage(`{"a":1}`)
	strict := func(raw []byte, into any) {
		t.Helper()
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(into), "%s", raw)
	}
	method, path, raw, err := httpRequestOf(stormtypes.Spec{Op: stormtypes.OpCreate, Create: model.CreateInput{Module: "NOTE", Title: "t", Summary: &summary, Payload: payload}})
	require.NoError(t, err)
	require.Equal(t, http.MethodPost, method)
	require.Equal(t, "/v1/modules/NOTE/records", path)
	var create httpapi.CreateBody
	strict(raw, &create)
	require.Equal(t, httpapi.CreateBody{Title: "t", Summary: &summary, Payload: payload}, create)

	method, path, raw, err = httpRequestOf(stormtypes.Spec{Op: stormtypes.OpPatch, Patch: model.PatchInput{Module: "NOTE", RecordID: "r1", ExpectRevision: 3, Title: &title}})
	require.NoError(t, err)
	require.Equal(t, http.MethodPatch, method)
	require.Equal(t, "/v1/modules/NOTE/records/r1", path)
	var patch httpapi.PatchBody
	strict(raw, &patch)
	require.Equal(t, httpapi.PatchBody{ExpectRevision: 3, Title: &title}, patch)

	method, path, raw, err = httpRequestOf(stormtypes.Spec{Op: stormtypes.OpAction, Action: model.FeatureInput{Module: "NOTE", RecordID: "r1", FeatureID: "F01", Input: payload}})
	require.NoError(t, err)
	require.Equal(t, http.MethodPost, method)
	require.Equal(t, "/v1/modules/NOTE/records/r1/features/F01", path)
	var feature httpapi.FeatureBody
	strict(raw, &feature)
	require.Equal(t, httpapi.FeatureBody{Input: payload}, feature)

	who, err := json.Marshal(httpapi.WhoAmI{Owner: "alice"})
	require.NoError(t, err)
	var w whoAmI
	require.NoError(t, json.Unmarshal(who, &w))
	require.Equal(t, "alice", w.Owner)

	eb, err := json.Marshal(wire.ErrorBody{Error: wire.ErrorDetail{Code: apperr.RevisionConflict, Status: 409, Message: "stale"}})
	require.NoError(t, err)
	ev := eventOfHTTP(409, eb)
	require.Equal(t, stormtypes.Event{Outcome: string(apperr.RevisionConflict), Err: "stale", Status: 409}, ev)
}
