package verifyrows_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/internal/kerneltest"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/verifyrows"
)

// owners write a history each; bob's lies between the others' in key order, so a page of every
// owner crosses from one owner's rows to the next, and bob's scope has neighbours on both sides.
var owners = []string{"alice", "bob", "carol"}

// history writes, through the kernel, every kind of row for each owner (several per table:
// creates, patches — a record of five revisions —, features internal, blocked and through the
// outbox, delivered, failed and pending, a review), a second run of one feature on bob's note
// (two executions of a feature on one record), then a second life of bob's key "a-create" once
// the first expired: a key with two lives.
func history(t *testing.T) *kerneltest.Bundle {
	t.Helper()
	ctx := context.Background()
	b := kerneltest.New(t)
	for _, o := range owners {
		b.WriteEveryKindOfRow(t, o)
	}
	var note string
	require.NoError(t, b.DB.Pool.QueryRow(ctx, `SELECT record_id FROM feature_execution WHERE owner_id = 'bob' AND idempotency_key = 'a-archive'`).Scan(&note))
	_, err := b.K.RunFeature(ctx, model.FeatureInput{Owner: "bob", Module: kernel.ModuleNote, RecordID: note, FeatureID: "F01", Key: "a-archive-again"})
	require.NoError(t, err)
	b.Clock.Advance(idem.DefaultTTL + time.Minute)
	_, err = b.K.Create(ctx, model.CreateInput{Owner: "bob", Module: kernel.ModuleNote, Key: "a-create", Title: "again",
		Payload: kerneltest.Raw(map[string]any{"text": "again"})})
	require.NoError(t, err)
	return b
}

// row is a row of one of verify's passes: the cursor of the page after it is its primary key.
type row interface{ Cursor() verifyrows.Cursor }

// table is one of verify's passes over a table: its page read, its whole-scope scan, and its
// primary key as read behind the store's back (owner $1, or every owner when $1 is empty).
type table[T row] struct {
	name string
	page func(context.Context, *store.DB, verifyrows.Page) ([]T, error)
	scan func(context.Context, *store.DB, verifyrows.Scope, func(T) error) error
	keys string
}

// keysOf reads the primary keys of scope owner as cursors, in the table's key order.
func keysOf(t *testing.T, b *kerneltest.Bundle, q, owner string) []verifyrows.Cursor {
	t.Helper()
	rows, err := b.DB.Pool.Query(context.Background(), q, owner)
	require.NoError(t, err)
	defer rows.Close()
	out := []verifyrows.Cursor{}
	for rows.Next() {
		var c verifyrows.Cursor
		require.NoError(t, rows.Scan(&c.Owner, &c.ID, &c.Rev))
		out = append(out, c)
	}
	require.NoError(t, rows.Err())
	return out
}

// pageAll reads scope owner page after page, limit rows each, each page starting after the last
// row of the one before, until a page comes back short (as verify reads them).
func pageAll[T row](t *testing.T, ctx context.Context, db *store.DB, read func(context.Context, *store.DB, verifyrows.Page) ([]T, error),
	owner string, limit int) []T {
	t.Helper()
	var all []T
	p := verifyrows.Page{Owner: owner, Limit: limit}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 1000, "the pages never end (a page that starts at its own last row?)")
		rows, err := read(ctx, db, p)
		require.NoError(t, err)
		require.LessOrEqual(t, len(rows), limit, "a page holds at most its limit")
		all = append(all, rows...)
		if len(rows) < limit {
			return all
		}
		p.After = rows[len(rows)-1].Cursor()
	}
}

// scanAll streams scope owner whole.
func scanAll[T row](t *testing.T, ctx context.Context, db *store.DB, scan func(context.Context, *store.DB, verifyrows.Scope, func(T) error) error,
	owner string) []T {
	t.Helper()
	var all []T
	require.NoError(t, scan(ctx, db, verifyrows.Scope{Owner: owner}, func(r T) error {
		all = append(all, r)
		return nil
	}))
	return all
}

// checkTable: for every scope (every owner, one owner between two others, an owner without rows)
// and page limits small enough that pages end between two owners and between two rows of one
// owner, the pages return exactly the scope's rows, each once, in key order; and the scan returns
// the very same rows, column for column (in whatever order its plan yields them: a scan other
// than the lives' promises none).
func checkTable[T row](t *testing.T, b *kerneltest.Bundle, tb table[T]) {
	t.Run(tb.name, func(t *testing.T) {
		all := keysOf(t, b, tb.keys, "")
		for _, o := range owners {
			n := 0
			for _, c := range all {
				if c.Owner == o {
					n++
				}
			}
			require.GreaterOrEqual(t, n, 3, "%s of %s: too few rows for a page of 2 to end between two of one owner", tb.name, o)
		}
		for _, owner := range []string{"", "bob", "nobody"} {
			want := keysOf(t, b, tb.keys, owner)
			order := map[verifyrows.Cursor]int{}
			for i, c := range want {
				order[c] = i
			}
			err := b.DB.DB.ReadSnapshot(testdb.Context(t), func(ctx context.Context) error {
				scanned := scanAll(t, ctx, b.DB.DB, tb.scan, owner)
				for _, r := range scanned {
					_, ok := order[r.Cursor()]
					require.True(t, ok, "%s of %q: the scan returned %+v, no row of the scope", tb.name, owner, r.Cursor())
				}
				slices.SortStableFunc(scanned, func(x, y T) int { return cmp.Compare(order[x.Cursor()], order[y.Cursor()]) })
				for _, limit := range []int{1, 2, 3, 1000} {
					paged := pageAll(t, ctx, b.DB.DB, tb.page, owner, limit)
					got := make([]verifyrows.Cursor, len(paged))
					for i, r := range paged {
						got[i] = r.Cursor()
					}
					require.Equal(t, want, got, "%s of %q in pages of %d: the scope's rows, each once, in key order", tb.name, owner, limit)
					require.Equal(t, paged, scanned, "%s of %q in pages of %d: what the scan read of each row", tb.name, owner, limit)
				}
				return nil
			})
			require.NoError(t, err)
		}
	})
}

// Every table verify reads, read page by page with small limits, is exactly what its scan
// streams for the same scope: the same rows, each once, with the same columns — a page boundary
// between two owners or between two rows of one owner (two revisions of one record included)
// loses nothing and changes nothing of the rows after it — and an owner's scope never holds
// another owner's rows.
func TestThePagesOfATableAreItsScanSplitByKey(t *testing.T) {
	t.Parallel()
	b := history(t)
	const scoped = ` WHERE $1 = '' OR owner_id = $1`
	checkTable(t, b, table[verifyrows.RecordRow]{"records", verifyrows.Records, verifyrows.RecordsScan,
		`SELECT owner_id, id, 0 FROM record` + scoped + ` ORDER BY owner_id, id`})
	checkTable(t, b, table[verifyrows.RevisionRow]{"revisions", verifyrows.Revisions, verifyrows.RevisionsScan,
		`SELECT owner_id, record_id, revision FROM record_revision` + scoped + ` ORDER BY owner_id, record_id, revision`})
	checkTable(t, b, table[verifyrows.ExecutionRow]{"executions", verifyrows.Executions, verifyrows.ExecutionsScan,
		`SELECT owner_id, id, 0 FROM feature_execution` + scoped + ` ORDER BY owner_id, id`})
	checkTable(t, b, table[verifyrows.KeyRow]{"keys",
		func(ctx context.Context, db *store.DB, p verifyrows.Page) ([]verifyrows.KeyRow, error) {
			return verifyrows.Keys(ctx, db, kernel.ResultRefs, p, true) // the light columns: what the scan reads
		},
		func(ctx context.Context, db *store.DB, s verifyrows.Scope, fn func(verifyrows.KeyRow) error) error {
			return verifyrows.KeysScan(ctx, db, kernel.ResultRefs, s, fn)
		},
		`SELECT owner_id, idempotency_key, 0 FROM idempotency_record` + scoped + ` ORDER BY owner_id, idempotency_key`})
	checkTable(t, b, table[verifyrows.OutboxRow]{"outbox", verifyrows.Outbox, verifyrows.OutboxScan,
		`SELECT owner_id, id, 0 FROM outbox_message` + scoped + ` ORDER BY owner_id, id`})
	checkTable(t, b, table[verifyrows.AuditRow]{"audit", verifyrows.Audit, verifyrows.AuditScan,
		`SELECT owner_id, id, 0 FROM audit_event` + scoped + ` ORDER BY owner_id, id`})
}

// The pages and the scan say the same things of the rows because those things are there to say:
// the columns the equality above compares are read, not left zero by both. A key row comes with
// the rows its result references (the light read without their content, the full one with it);
// a revision with its parent, its predecessor's digest and its write's audit event; an
// execution with its run's audit event and its outbox message.
func TestTheRowsComeWithWhatTheyReference(t *testing.T) {
	t.Parallel()
	b := history(t)
	ctx := testdb.Context(t)
	keys := map[bool]map[string]verifyrows.KeyRow{}
	for _, light := range []bool{true, false} {
		rows, err := verifyrows.Keys(ctx, b.DB.DB, kernel.ResultRefs, verifyrows.Page{Owner: "bob", Limit: 1000}, light)
		require.NoError(t, err)
		keys[light] = map[string]verifyrows.KeyRow{}
		for _, r := range rows {
			keys[light][r.Key] = r
		}
	}
	for _, light := range []bool{true, false} {
		k := keys[light]
		require.NotNil(t, k["a-create"].Revision, "light %v: a create's key row comes with its revision", light)
		require.Equal(t, 1, k["a-create"].Revision.Revision.Revision)
		require.True(t, k["a-create"].Revision.ParentID != "" && k["a-create"].Revision.Attest.XID != nil, "light %v: and its record and transaction", light)
		require.NotNil(t, k["a-patch-2"].Revision, "light %v", light)
		require.Equal(t, 3, k["a-patch-2"].Revision.Revision.Revision, "light %v: the second patch's key row names revision 3", light)
		require.NotNil(t, k["a-archive"].Execution, "light %v: a feature's key row comes with its execution", light)
		require.Equal(t, "F01", k["a-archive"].Execution.FeatureID)
		require.NotNil(t, k["a-review"].Review, "light %v: a review's key row comes with its review", light)
		require.Equal(t, "kept", k["a-review"].Review.Verdict)
		require.Equal(t, light, k["a-create"].Revision.Snapshot == nil, "the snapshot is read unless light")
		require.Equal(t, light, k["a-create"].Revision.Attest.Digest == nil, "the digest is read unless light")
		require.Equal(t, light, k["a-archive"].Execution.Input == nil, "the input is read unless light")
	}

	revs, err := verifyrows.Revisions(ctx, b.DB.DB, verifyrows.Page{Owner: "bob", Limit: 1000})
	require.NoError(t, err)
	chained := 0
	for _, r := range revs {
		require.True(t, r.HasParent, "%+v", r.Cursor())
		require.Equal(t, 1, r.WriteAudits, "%+v: its write's audit event", r.Cursor())
		require.NotEmpty(t, r.Attest.Digest)
		require.Equal(t, r.Revision.Revision > 1, r.Attest.Prev != nil, "%+v: revision n>1 chains on n-1's digest", r.Cursor())
		if r.Attest.Prev != nil {
			chained++
		}
	}
	require.GreaterOrEqual(t, chained, 4, "the five-revision record's chain")

	execs, err := verifyrows.Executions(ctx, b.DB.DB, verifyrows.Page{Owner: "bob", Limit: 1000})
	require.NoError(t, err)
	messages := 0
	for _, e := range execs {
		require.True(t, e.HasRecord && e.AtRevision, "%s", e.ID)
		require.Equal(t, 1, e.RunAudits, "%s: its run's audit event", e.ID)
		messages += e.Messages
	}
	require.Positive(t, messages)
	require.Equal(t, b.Count(t, `SELECT count(*) FROM outbox_message WHERE owner_id = 'bob'`), messages, "every message of bob's is counted on its execution")
}

// lifePages reads every key's lives of scope owner with KeyLivesPage, about limit keyed audit
// events a page, each page starting where the one before said, until one says it is the last.
// A page's read counts the keyed audit events it was cut by: one at least when it holds a key,
// never more than the limit.
func lifePages(t *testing.T, ctx context.Context, db *store.DB, owner string, limit int) (all []verifyrows.KeyLives) {
	t.Helper()
	p := verifyrows.Page{Owner: owner, Limit: limit}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 1000, "the pages never end")
		keys, next, more, read, err := verifyrows.KeyLivesPage(ctx, db, p)
		require.NoError(t, err)
		require.Equal(t, len(keys) > 0, read > 0, "a page of %d keys read %d audit events", len(keys), read)
		require.LessOrEqual(t, read, limit)
		all = append(all, keys...)
		if !more {
			return all
		}
		p.After = next
	}
}

// Every key's lives, read page by page (a few keyed audit events a page, so that pages end
// between two owners and between two keys of one owner), are exactly what KeyLivesScan streams
// for the same scope, in the same order (owner, key, then a key's lives oldest first), each key
// once with all its lives (a page never splits a key), with its key row; an owner's scope holds
// only its keys. The scan's reads count the keys' audit events of a run (none of the outbox
// worker's settles).
func TestTheKeyLivesPagesAreTheScanSplitBetweenKeys(t *testing.T) {
	t.Parallel()
	b := history(t)
	for _, owner := range []string{"", "bob", "nobody"} {
		scoped := ` AND ($1 = '' OR owner_id = $1)`
		var union []string
		for _, tb := range []string{"record_revision", "feature_execution", "commitment_review", "outbox_message", "audit_event"} {
			union = append(union, `SELECT owner_id, idempotency_key FROM `+tb+` WHERE idempotency_key IS NOT NULL`+scoped)
		}
		// A key's lives are its rows of every table but the outbox worker's settle events.
		wantKeys := keysOf(t, b, `SELECT owner_id, idempotency_key, 0 FROM (`+strings.Join(union, " UNION ")+`
				AND action !~ '`+store.SettleActionPattern+`') k ORDER BY owner_id, idempotency_key`, owner)
		runs := b.Count(t, `SELECT count(*) FROM audit_event WHERE idempotency_key IS NOT NULL AND action !~ '`+store.SettleActionPattern+`'`+scoped, owner)
		err := b.DB.DB.ReadSnapshot(testdb.Context(t), func(ctx context.Context) error {
			var scanned []verifyrows.KeyLives
			scanReads := 0
			require.NoError(t, verifyrows.KeyLivesScan(ctx, b.DB.DB, verifyrows.Scope{Owner: owner}, func(k verifyrows.KeyLives, read int) error {
				scanned = append(scanned, k)
				scanReads += read
				return nil
			}))
			got := make([]verifyrows.Cursor, len(scanned))
			for i, k := range scanned {
				got[i] = verifyrows.Cursor{Owner: k.OwnerID, ID: k.Key}
			}
			require.Equal(t, wantKeys, got, "the scan of %q: each key of the scope once, in key order", owner)
			require.Equal(t, runs, scanReads, "the scan of %q: its runs' audit events", owner)
			if owner == "bob" {
				i := slices.IndexFunc(scanned, func(k verifyrows.KeyLives) bool { return k.Key == "a-create" })
				require.Len(t, scanned[i].Lives, 2, "bob's a-create lived twice")
				require.True(t, scanned[i].Lives[0].Last.Before(scanned[i].Lives[1].First), "oldest first")
				require.NotNil(t, scanned[i].Row)
				require.Equal(t, "SUCCEEDED", scanned[i].Row.Status)
			}
			for _, limit := range []int{1, 2, 3, 1000} {
				require.Equal(t, scanned, lifePages(t, ctx, b.DB.DB, owner, limit), "the lives of %q in pages of %d", owner, limit)
			}
			return nil
		})
		require.NoError(t, err)
	}
}

// Estimate is exact for one owner: each table's count of the owner's rows (since a time: of
// those written or changed since then, by the column verify's pages filter on). For every owner
// it is the planner's estimate — pg_class.reltuples, exact right after an ANALYZE of a small table.
func TestEstimateCountsAnOwnersRowsAndEstimatesEveryOwners(t *testing.T) {
	t.Parallel()
	b := kerneltest.New(t)
	ctx := testdb.Context(t)
	b.WriteEveryKindOfRow(t, "alice")
	old := b.CreateNote(t, "alice", "", "old")
	b.Clock.Advance(time.Hour)
	since := b.Clock.Now()
	for _, o := range owners[1:] {
		b.WriteEveryKindOfRow(t, o)
	}
	// Since then, alice created a note and changed an old one (under a key).
	b.CreateNote(t, "alice", "", "new")
	_, err := b.K.Patch(ctx, model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: old.Record.ID, ExpectRevision: 1, Key: "later",
		Title: kerneltest.Str("changed")})
	require.NoError(t, err)
	tables := map[string]struct{ table, at string }{"keys": {"idempotency_record", "updated_at"}, "records": {"record", "updated_at"},
		"revisions": {"record_revision", "created_at"}, "executions": {"feature_execution", "updated_at"},
		"outboxMessages": {"outbox_message", "updated_at"}, "auditEvents": {"audit_event", "at"}}
	count := func(owner string, since time.Time) map[string]int64 {
		out := map[string]int64{}
		for name, tb := range tables {
			out[name] = int64(b.Count(t, fmt.Sprintf(`SELECT count(*) FROM %s WHERE ($1 = '' OR owner_id = $1) AND %s >= $2`, tb.table, tb.at), owner, since))
		}
		return out
	}
	for _, c := range []struct {
		owner string
		since time.Time
	}{{"alice", time.Time{}}, {"bob", time.Time{}}, {"alice", since}, {"nobody", time.Time{}}} {
		got, err := verifyrows.Estimate(ctx, b.DB.DB, c.owner, c.since)
		require.NoError(t, err)
		require.Equal(t, count(c.owner, c.since), got, "%s since %s", c.owner, c.since)
	}
	require.Equal(t, int64(2), count("alice", since)["records"], "alice's records written or changed since")
	require.Equal(t, int64(1), count("alice", since)["keys"], "the key row of alice's patch (her notes had none)")
	require.Greater(t, count("alice", time.Time{})["records"], int64(2))

	for _, tb := range tables {
		b.Exec(t, `ANALYZE `+tb.table)
	}
	got, err := verifyrows.Estimate(ctx, b.DB.DB, "", time.Time{})
	require.NoError(t, err)
	require.Equal(t, count("", time.Time{}), got, "every owner's, right after ANALYZE")
}
