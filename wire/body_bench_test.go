package wire_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemwork/idemwork/wire"
)

// An answer of a record with a 60 KB payload, encoded and served, as GET of a record does
// (`go test -bench ServeALargeAnswer -benchmem ./wire`): B/op was about three bodies' worth
// before the encoder's output was handed over as the body and written without a copy, one now.
// Its time was 632-893 µs/op with encoding/json, 164-177 µs/op with encoding/json's semantics on
// the json v2 engine (3 alternated runs each, a quiet machine, stop 36): the raw fields' check
// and compaction was most of it.
func BenchmarkServeALargeAnswer(b *testing.B) {
	payload := json.RawMessage(`{"blob": "` + strings.Repeat("x", 60<<10) + `"}`)
	body := struct {
		Record   map[string]any    `json:"record"`
		Snapshot json.RawMessage   `json:"snapshot"`
		Links    map[string]string `json:"links"`
	}{Record: map[string]any{"id": "01M8VGHECN7YMXRN7TPFQ17HNH", "payload": payload}, Snapshot: payload, Links: map[string]string{"revisions": "/v1/…"}}
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		w.Body.Reset()
		wire.JSON(http.StatusOK, body).Serve(w)
	}
	b.SetBytes(int64(w.Body.Len()))
}
