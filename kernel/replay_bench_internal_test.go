package kernel

import (
	"testing"
	"time"

	"github.com/idemwork/idemwork/attest"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// BenchmarkReplayChecks is what a feature replay checks of the rows its one statement read —
// SPEC §6's checks of the revision and its snapshot, the revision's digest chain and the
// execution's digest — without a database: the runner's CPU per replay beyond its limit's.
func BenchmarkReplayChecks(b *testing.B) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	key, xid := "rp-r-bench-1", "778123"
	rec := model.Record{ID: "01JZ3W9Q8X4T6V2N1M0K7H5G3F", OwnerID: "alice", ModuleCode: ModuleMem, Revision: 2, Title: "bench note",
		Payload: benchPayload, CreatedAt: at, UpdatedAt: at}
	snap, err := store.AppendSnapshot(nil, rec)
	if err != nil {
		b.Fatal(err)
	}
	prev := attest.Revision(nil, attest.Head{At: &at, Key: &key, XID: &xid}, []byte(`{}`))
	row := store.RevisionWithParent{
		Revision:    model.Revision{OwnerID: rec.OwnerID, RecordID: rec.ID, Revision: rec.Revision, Snapshot: snap, IdempotencyKey: &key, CreatedAt: at},
		ParentOwner: rec.OwnerID, ParentID: rec.ID, ParentModule: rec.ModuleCode,
		Attest: store.Attestation{XID: &xid, Prev: prev}}
	row.Attest.Digest = attest.Revision(prev, revisionHead(row.Revision, row.Attest), snap)
	e := model.Execution{ID: "01JZ3W9Q8X4T6V2N1M0K7H5G3G", OwnerID: rec.OwnerID, ModuleCode: rec.ModuleCode, RecordID: rec.ID, FeatureID: "F01",
		Mode: "internal", Status: "SUCCEEDED", RecordRevision: 2, Input: []byte(`{}`), Output: []byte(`{"charactersAfter": 41, "charactersBefore": 52}`),
		IdempotencyKey: &key, CreatedAt: at, UpdatedAt: at}
	ea := store.Attestation{XID: &xid, Prev: row.Attest.Digest}
	ea.Digest = attest.OfExecution(ea.Prev, attest.Head{At: &at, Key: &key, XID: &xid}, executionOf(e))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := checkAttestedSnapshot(row, rec.OwnerID, rec.ModuleCode, rec.ID, rec.Revision); err != nil {
			b.Fatal(err)
		}
		if err := checkExecutionDigest(e, ea); err != nil {
			b.Fatal(err)
		}
	}
}
