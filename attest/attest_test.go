package attest

import (
	"bytes"
	"crypto/sha256"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemwork/idemwork/jsonb"
)

// The documents were built member by member through jsonb.AppendObject, which sorts them into
// jsonb's order; they are now written straight in that order. These are the old builders, kept
// as the reference the new writers must equal byte for byte (the digests the server computes are
// pinned against Revision and OfExecution in package kernel's tests).

func referenceHead(h Head, body jsonb.Member) []byte {
	null := []byte("null")
	at, key, xid := null, null, null
	if h.At != nil {
		at = strconv.AppendInt(nil, h.At.UnixMicro(), 10)
	}
	if h.Key != nil {
		key = jsonb.AppendString(nil, *h.Key)
	}
	if h.XID != nil {
		xid = jsonb.AppendString(nil, *h.XID)
	}
	return jsonb.AppendObject(nil, jsonb.Member{Name: "at", Value: at}, jsonb.Member{Name: "key", Value: key},
		jsonb.Member{Name: "xid", Value: xid}, body)
}

func referenceExecution(h Head, e Execution) []byte {
	str := func(s string) []byte { return jsonb.AppendString(nil, s) }
	orNull := func(b []byte) []byte {
		if b == nil {
			return []byte("null")
		}
		return b
	}
	inner := jsonb.AppendObject(nil,
		jsonb.Member{Name: "id", Value: str(e.ID)},
		jsonb.Member{Name: "ownerId", Value: str(e.OwnerID)},
		jsonb.Member{Name: "moduleCode", Value: str(e.ModuleCode)},
		jsonb.Member{Name: "recordId", Value: str(e.RecordID)},
		jsonb.Member{Name: "featureId", Value: str(e.FeatureID)},
		jsonb.Member{Name: "mode", Value: str(e.Mode)},
		jsonb.Member{Name: "status", Value: str(WrittenStatus(e.Mode, e.Status))},
		jsonb.Member{Name: "recordRevision", Value: strconv.AppendInt(nil, int64(e.RecordRevision), 10)},
		jsonb.Member{Name: "input", Value: orNull(e.Input)},
		jsonb.Member{Name: "output", Value: orNull(e.Output)})
	return referenceHead(h, jsonb.Member{Name: "execution", Value: inner})
}

func TestTheDocumentsAreJsonbsCanonicalTextOfTheirMembers(t *testing.T) {
	at := time.Date(2026, 12, 2, 6, 30, 0, 123456000, time.UTC)
	key, xid, odd := "k-1", "7781", "a \"quoted\"\n\\key\x01é"
	big := []byte(`{"payload": {"text": "` + strings.Repeat("x", 3*stackDoc) + `"}}`)
	heads := []Head{{}, {At: &at}, {At: &at, Key: &key, XID: &xid}, {Key: &odd}, {XID: &odd}}
	snapshots := [][]byte{[]byte(`{"id": "R", "revision": 1}`), big}
	execs := []Execution{
		{ID: "E", OwnerID: "alice", ModuleCode: "NOTE", RecordID: "R", FeatureID: "F01", Mode: "internal", Status: "SUCCEEDED", RecordRevision: 2,
			Input: []byte(`{"a": 1}`), Output: []byte(`{"b": [1, 2]}`)},
		{ID: odd, OwnerID: odd, ModuleCode: "MEM", RecordID: odd, FeatureID: "F02", Mode: "outbox", Status: "SENT", RecordRevision: 1234567},
		{ID: "E", Mode: "internal", Output: big},
	}
	prev := sha256.Sum256([]byte("the revision before"))
	for i, h := range heads {
		for j, snap := range snapshots {
			want := referenceHead(h, jsonb.Member{Name: "snapshot", Value: snap})
			if got := RevisionDocument(h, snap); !bytes.Equal(got, want) {
				t.Fatalf("head %d, snapshot %d: revision document\n got %s\nwant %s", i, j, got, want)
			}
			digest := sha256.Sum256(append(append([]byte(nil), prev[:]...), want...))
			if !bytes.Equal(Revision(prev[:], h, snap), digest[:]) || !RevisionHolds(digest[:], prev[:], h, snap) {
				t.Fatalf("head %d, snapshot %d: the revision digest is not sha256(prev ‖ document)", i, j)
			}
			if RevisionHolds(digest[:], nil, h, snap) || RevisionHolds(digest[:], prev[:], h, append([]byte(" "), snap...)) {
				t.Fatalf("head %d, snapshot %d: a digest holds for another predecessor or snapshot", i, j)
			}
		}
		for j, e := range execs {
			want := referenceExecution(h, e)
			if got := ExecutionDocument(h, e); !bytes.Equal(got, want) {
				t.Fatalf("head %d, execution %d: execution document\n got %s\nwant %s", i, j, got, want)
			}
			digest := sha256.Sum256(append(append([]byte(nil), prev[:]...), want...))
			if !bytes.Equal(OfExecution(prev[:], h, e), digest[:]) || !ExecutionHolds(digest[:], prev[:], h, e) {
				t.Fatalf("head %d, execution %d: the execution digest is not sha256(revision ‖ document)", i, j)
			}
			changed := e
			changed.RecordRevision++
			if ExecutionHolds(digest[:], prev[:], h, changed) || ExecutionHolds(digest[:], nil, h, e) {
				t.Fatalf("head %d, execution %d: a digest holds for another execution or revision", i, j)
			}
		}
	}
}

func TestACheckOfASmallRevisionOrExecutionAllocatesNothing(t *testing.T) {
	at := time.Date(2026, 12, 2, 6, 30, 0, 0, time.UTC)
	key, xid := "k-1", "7781"
	h := Head{At: &at, Key: &key, XID: &xid}
	snap := []byte(`{"id": "R", "title": "t", "ownerId": "alice", "payload": {}, "revision": 2, "moduleCode": "NOTE"}`)
	e := Execution{ID: "E", OwnerID: "alice", ModuleCode: "NOTE", RecordID: "R", FeatureID: "F01", Mode: "internal", Status: "SUCCEEDED",
		RecordRevision: 2, Input: []byte(`{}`), Output: []byte(`{"ok": true}`)}
	prev := Revision(nil, h, snap)
	rd, ed := Revision(prev, h, snap), OfExecution(prev, h, e)
	if n := testing.AllocsPerRun(100, func() {
		if !RevisionHolds(rd, prev, h, snap) || !ExecutionHolds(ed, prev, h, e) {
			t.Fatal("a digest does not hold")
		}
	}); n != 0 {
		t.Fatalf("a check allocated %v times", n)
	}
}
