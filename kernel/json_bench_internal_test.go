package kernel

import (
	"encoding/json"
	"testing"
)

// The kernel's JSON steps on the write and replay paths, without a database.

var benchPayload = []byte(`{"tags": ["home", "todo"], "text": "call the plumber about the kitchen tap", "priority": 2, "due": {"day": "2026-01-02", "remind": true}}`)

// BenchmarkDecodePayload: a module's payload rules and an internal feature read the payload.
func BenchmarkDecodePayload(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeObject(benchPayload); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFeatureOutput: an internal feature's output and next payload to canonical text.
func BenchmarkFeatureOutput(b *testing.B) {
	out := map[string]any{"charactersBefore": 52, "charactersAfter": 41, "archived": true, "tags": []any{"home", json.Number("2.50"), nil},
		"text": "call the plumber about the kitchen tap"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := canonicalJSON(out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeSnapshot: a replay reads the revision's snapshot back.
func BenchmarkDecodeSnapshot(b *testing.B) {
	raw := []byte(`{"id": "01JZ3W9Q8X4T6V2N1M0K7H5G3F", "title": "bench note", "payload": {"tags": ["home", "todo"], "text": "call the plumber about the kitchen tap", "priority": 2}, "ownerId": "alice", "summary": "", "revision": 2, "createdAt": "2026-01-02T03:04:05.123456Z", "updatedAt": "2026-01-02T03:04:05.654321Z", "moduleCode": "NOTE"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := decodeSnapshot(raw); !ok {
			b.Fatal("declined")
		}
	}
}

// BenchmarkDecodeRef: a replay reads the stored result reference.
func BenchmarkDecodeRef(b *testing.B) {
	raw := []byte(`{"revision": 2, "recordId": "01JZ3W9Q8X4T6V2N1M0K7H5G3F", "executionId": "01JZ3W9Q8X4T6V2N1M0K7H5G3G"}`)
	b.ReportAllocs()
	for b.Loop() {
		var ref executionRef
		if err := decodeExecutionRef(raw, &ref); err != nil {
			b.Fatal(err)
		}
	}
}
