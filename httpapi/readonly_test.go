package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/httpapi"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

func TestAReadOnlyServerRefusesWritesEvenReplaysAndStillServesReads(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	rw := kernel.New(db.DB, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{})
	first, err := rw.Create(context.Background(), model.CreateInput{Owner: "alice", Module: "NOTE", Key: "k", Title: "t"})
	require.NoError(t, err)

	ro, err := store.Open(context.Background(), db.DSN, store.Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	k := kernel.New(ro, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{})
	api := httpapi.New(k, httpapi.Options{Tokens: map[string]string{aliceToken: "alice"}})

	serve := func(method, path, body string) (int, map[string]any) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		req.Header.Set("Idempotency-Key", "k")
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		var m map[string]any
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &m))
		return rec.Code, m
	}
	code, body := serve(http.MethodPost, "/v1/modules/NOTE/records", `{"title":"t"}`)
	require.Equal(t, http.StatusForbidden, code)
	require.Equal(t, "READ_ONLY", body["error"].(map[string]any)["code"])

	code, body = serve(http.MethodGet, "/v1/modules/NOTE/records/"+first.Record.ID, "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, first.Record.ID, body["record"].(map[string]any)["id"])
}
