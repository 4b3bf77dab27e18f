package readmodel_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store/readmodel"
)

// A committed PROCESSING row has no response (SPEC §4.1); every reader of keys lists it, with a
// nil response, instead of failing the whole owner's page.
func TestAProcessingRowIsReadWithItsNullResponse(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at) VALUES
		('alice', 'left-over', 'NOTE:record:create', 'f', 'PROCESSING', NULL, now(), now() + interval '1 day', now()),
		('alice', 'done', 'NOTE:record:create', 'f', 'SUCCEEDED', '{"schemaVersion": 1}', now() - interval '1 minute', now() + interval '1 day', now())`)
	require.NoError(t, err)

	rows, _, err := readmodel.Keys(ctx, db.DB, model.KeyQuery{Owner: "alice"})
	require.NoError(t, err)
	require.Len(t, rows, 2)
	require.Equal(t, "left-over", rows[0].Key)
	require.Equal(t, "PROCESSING", rows[0].Status)
	require.Nil(t, rows[0].Response)
	require.JSONEq(t, `{"schemaVersion": 1}`, string(rows[1].Response))

	k, err := readmodel.GetKey(ctx, db.DB, "alice", "left-over")
	require.NoError(t, err)
	require.Nil(t, k.Response)
	prefixed, _, err := readmodel.Keys(ctx, db.DB, model.KeyQuery{Owner: "alice", Prefix: "left"})
	require.NoError(t, err)
	require.Len(t, prefixed, 1)
}

func seedTimeline(t *testing.T, db *testdb.DB) {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(), `
INSERT INTO record VALUES ('alice', '01JREC0000000000000000000A', 'NOTE', 2, 't', '', '{}', '2026-01-01T10:00:00Z', '2026-01-01T10:05:00Z');
INSERT INTO record_revision VALUES
 ('alice', '01JREC0000000000000000000A', 1, '{"moduleCode": "NOTE"}', 'k-1', '2026-01-01T10:00:00Z'),
 ('alice', '01JREC0000000000000000000A', 2, '{"moduleCode": "NOTE"}', 'k-2', '2026-01-01T10:05:00Z');
INSERT INTO audit_event (owner_id, id, module_code, record_id, action, revision, idempotency_key, at) VALUES
 ('alice', 'a1', 'NOTE', '01JREC0000000000000000000A', 'RECORD_CREATED', 1, 'k-1', '2026-01-01T10:00:00Z'),
 ('alice', 'a2', 'NOTE', '01JREC0000000000000000000A', 'RECORD_PATCHED', 2, 'k-2', '2026-01-01T10:05:00Z'),
 ('alice', 'a3', 'NOTE', '01JREC0000000000000000000A', 'RECORD_PATCHED', 3, 'other', '2026-01-01T10:06:00Z');
INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at) VALUES
 ('alice', 'k-1', 'NOTE:record:create', 'f', 'SUCCEEDED', '{}', '2026-01-01T10:00:00Z', '2026-01-02T10:00:00Z', '2026-01-01T10:00:00Z'),
 ('alice', 'k-2', 'NOTE:record:01JREC0000000000000000000A:patch', 'f', 'PROCESSING', NULL, '2026-01-01T10:05:00Z', '2026-01-02T10:05:00Z', '2026-01-01T10:05:00Z');`)
	require.NoError(t, err)
}

func TestTheTimelineSearchesByKeyAndByAction(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	seedTimeline(t, db)

	one, err := readmodel.KeyHistory(ctx, db.DB, "alice", "k-1", 100)
	require.NoError(t, err)
	var kinds []string
	for _, e := range one {
		require.Equal(t, "k-1", *e.Key)
		kinds = append(kinds, e.Kind)
	}
	require.Equal(t, []string{"audit", "key", "revision"}, kinds, "the key's whole story, oldest first")

	byPrefix, _, err := readmodel.Timeline(ctx, db.DB, model.HistoryQuery{Owner: "alice", KeyPrefix: "k-"})
	require.NoError(t, err)
	var keys []string
	for _, e := range byPrefix {
		keys = append(keys, *e.Key+"/"+e.Kind)
	}
	require.Equal(t, []string{"k-1/audit", "k-1/key", "k-1/revision", "k-2/audit", "k-2/key", "k-2/revision"}, keys, "key order, then time")

	// Paging by key: every page continues exactly after the last one.
	var paged []string
	cursor := ""
	for {
		rows, next, err := readmodel.Timeline(ctx, db.DB, model.HistoryQuery{Owner: "alice", KeyPrefix: "k-", Limit: 2, Cursor: cursor})
		require.NoError(t, err)
		for _, e := range rows {
			paged = append(paged, *e.Key+"/"+e.Kind)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	require.Equal(t, keys, paged)

	patched, _, err := readmodel.Timeline(ctx, db.DB, model.HistoryQuery{Owner: "alice", ActionPrefix: "RECORD_P", Desc: true})
	require.NoError(t, err)
	require.Len(t, patched, 2)
	require.Equal(t, "a3", patched[0].ID, "newest first")
	require.Equal(t, "a2", patched[1].ID)
}

func TestTheHistoryExportStreamsTheWholeOwner(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	seedTimeline(t, db)

	var js bytes.Buffer
	var pages []int
	n, err := readmodel.ExportHistory(ctx, db.DB, model.HistoryQuery{Owner: "alice"}, model.ExportJSON, &js, 0, func(n int) { pages = append(pages, n) })
	require.NoError(t, err)
	require.Equal(t, 7, n)
	var doc struct {
		Events []model.Event `json:"events"`
		Next   *string       `json:"next"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &doc), js.String())
	require.Len(t, doc.Events, 7)
	require.Nil(t, doc.Next)
	require.Equal(t, []int{7}, pages)

	var cs bytes.Buffer
	n, err = readmodel.ExportHistory(ctx, db.DB, model.HistoryQuery{Owner: "alice"}, model.ExportCSV, &cs, 3, nil)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	recs, err := csv.NewReader(&cs).ReadAll()
	require.NoError(t, err)
	require.Len(t, recs, 4, "a header and three rows")
	require.Equal(t, readmodel.ExportColumns, recs[0])
	require.Equal(t, "audit", recs[1][1])

	var empty bytes.Buffer
	_, err = readmodel.ExportHistory(ctx, db.DB, model.HistoryQuery{Owner: "nobody"}, model.ExportJSON, &empty, 0, nil)
	require.NoError(t, err)
	require.JSONEq(t, `{"events": [], "next": null}`, empty.String())
}

// Every time read back is in UTC, whatever the process's zone (pgx would hand back time.Local):
// one JSON shape prints one instant one way, "…Z", for records built in UTC and for history
// events and keys read from the database alike.
func TestTimesAreReadBackInUTC(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	seedTimeline(t, db)
	ctx := context.Background()
	events, _, err := readmodel.History(ctx, db.DB, "alice", 50, "", false)
	require.NoError(t, err)
	require.NotEmpty(t, events)
	for _, e := range events {
		require.Same(t, time.UTC, e.At.Location(), "%s %s", e.Kind, e.ID)
	}
	k, err := readmodel.GetKey(ctx, db.DB, "alice", "k-1")
	require.NoError(t, err)
	require.Same(t, time.UTC, k.CreatedAt.Location())
	require.Same(t, time.UTC, k.ExpiresAt.Location())
	var at time.Time
	require.NoError(t, db.Q(ctx).QueryRow(ctx, `SELECT created_at FROM record WHERE owner_id = 'alice'`).Scan(&at))
	require.Same(t, time.UTC, at.Location(), "through the kernel's pgx path too")
	b, err := json.Marshal(events[0])
	require.NoError(t, err)
	require.Contains(t, string(b), `Z"`)
}
