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
	"github.com/idemwork/idemwork/outbox"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/verifyrows"
)

// owners write a history each; bob's lies between the others' in key order, so a page of every
// owner crosses from one owner's rows to the next, and bob's scope has neighbours on both sides.
var owners = []string{"alice", "bob", "carol"}

// history writes, through the kernel, every kind of row for each owner (several per table:
// creates, patches — a record of five revisions —, features internal, blocked and through the
// outbox, delivered, failed and pending, a review), a second run of one feature on bob's note
// (two executions of a feature on one record); then, since a day later, a second life of bob's
// key "a-create" (a key with two lives), a feature of bob's through the outbox, and the pending
// messages delivered.
func history(t *testing.T) (b *kerneltest.Bundle, since time.Time) {
	t.Helper()
	ctx := context.Background()
	b = kerneltest.New(t)
	for _, o := range owners {
		b.WriteEveryKindOfRow(t, o)
	}
	var note string
	require.NoError(t, b.DB.Pool.QueryRow(ctx, `SELECT record_id FROM feature_execution WHERE owner_id = 'bob' AND idempotency_key = 'a-archive'`).Scan(&note))
	_, err := b.K.RunFeature(ctx, model.FeatureInput{Owner: "bob", Module: kernel.ModuleNote, RecordID: note, FeatureID: "F01", Key: "a-archive-again"})
	require.NoError(t, err)
	b.Clock.Advance(idem.DefaultTTL + time.Minute)
	since = b.Clock.Now()
	_, err = b.K.Create(ctx, model.CreateInput{Owner: "bob", Module: kernel.ModuleNote, Key: "a-create", Title: "again",
		Payload: kerneltest.Raw(map[string]any{"text": "again"})})
	require.NoError(t, err)
	c := b.CreateCommitment(t, "bob", "")
	_, err = b.K.RunFeature(ctx, model.FeatureInput{Owner: "bob", Module: kernel.ModuleCommitment, RecordID: c.Record.ID, FeatureID: "F02", Key: "a-notify-d"})
	require.NoError(t, err)
	pending := b.Count(t, `SELECT count(*) FROM outbox_message WHERE status = 'PENDING'`)
	require.Equal(t, 2, pending, "bob's message and carol's last (the others' were delivered by the next owner's worker)")
	w := outbox.NewWorker(b.DB.DB, outbox.Options{Providers: map[string]outbox.Provider{"notifier": outbox.NewMemoryProvider()}, Clock: b.Clock, MaxAttempts: 1})
	rep, err := w.RunOnce(ctx, 100)
	require.NoError(t, err)
	require.Equal(t, pending, rep.Claimed)
	return b, since
}

// row is a row of one of verify's passes: the cursor of the page after it is its primary key.
type row interface{ Cursor() verifyrows.Cursor }

// table is one of verify's passes over a table: its page read, its whole-scope scan, and where
// its rows are: the table, its primary key after owner_id (with 0 for a revision number when it
// has none), the time column of "written or changed since".
type table[T row] struct {
	name          string
	page          func(context.Context, *store.DB, verifyrows.Page) ([]T, error)
	scan          func(context.Context, *store.DB, verifyrows.Scope, func(T) error) error
	from, key, at string
}

// want reads, behind the store's back, the primary keys of scope owner's rows (written or
// changed since since, unless it is zero) as cursors, in key order.
func (tb table[T]) want(t *testing.T, b *kerneltest.Bundle, owner string, since time.Time) []verifyrows.Cursor {
	t.Helper()
	var at *time.Time
	if !since.IsZero() {
		at = &since
	}
	return cursors(t, b, `SELECT owner_id, `+tb.key+` FROM `+tb.from+` WHERE ($1 = '' OR owner_id = $1)
		AND ($2::timestamptz IS NULL OR `+tb.at+` >= $2) ORDER BY 1, 2, 3`, owner, at)
}

// cursors reads q's (owner, id, revision) rows as cursors.
func cursors(t *testing.T, b *kerneltest.Bundle, q string, args ...any) []verifyrows.Cursor {
	t.Helper()
	rows, err := b.DB.Pool.Query(context.Background(), q, args...)
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

// pageAll reads the pages of p.Owner's scope (since p.Since), p.Limit rows each, each page
// starting after the last row of the one before, until a page comes back short (as verify reads
// them).
func pageAll[T row](t *testing.T, ctx context.Context, db *store.DB, read func(context.Context, *store.DB, verifyrows.Page) ([]T, error),
	p verifyrows.Page) []T {
	t.Helper()
	var all []T
	limit := p.Limit
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
// than the lives' promises none). With Since, the pages return exactly the scope's rows written
// or changed since then, each as the scan read it.
func checkTable[T row](t *testing.T, b *kerneltest.Bundle, since time.Time, tb table[T]) {
	t.Run(tb.name, func(t *testing.T) {
		all := tb.want(t, b, "", time.Time{})
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
			want := tb.want(t, b, owner, time.Time{})
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
					paged := pageAll(t, ctx, b.DB.DB, tb.page, verifyrows.Page{Owner: owner, Limit: limit})
					got := make([]verifyrows.Cursor, len(paged))
					for i, r := range paged {
						got[i] = r.Cursor()
					}
					require.Equal(t, want, got, "%s of %q in pages of %d: the scope's rows, each once, in key order", tb.name, owner, limit)
					require.Equal(t, paged, scanned, "%s of %q in pages of %d: what the scan read of each row", tb.name, owner, limit)
				}
				if owner == "nobody" {
					return nil
				}
				recent := tb.want(t, b, owner, since)
				require.NotEmpty(t, recent, "%s of %q: no row written or changed since", tb.name, owner)
				require.Less(t, len(recent), len(want))
				for _, limit := range []int{1, 2, 1000} {
					paged := pageAll(t, ctx, b.DB.DB, tb.page, verifyrows.Page{Owner: owner, Limit: limit, Since: since})
					got := make([]verifyrows.Cursor, len(paged))
					for i, r := range paged {
						got[i] = r.Cursor()
						require.Equal(t, scanned[order[r.Cursor()]], r, "%s of %q since, in pages of %d: %+v as the scan read it", tb.name, owner, limit, r.Cursor())
					}
					require.Equal(t, recent, got, "%s of %q since, in pages of %d: the rows written or changed since, each once, in key order", tb.name, owner, limit)
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
	b, since := history(t)
	checkTable(t, b, since, table[verifyrows.RecordRow]{"records", verifyrows.Records, verifyrows.RecordsScan, "record", "id, 0", "updated_at"})
	checkTable(t, b, since, table[verifyrows.RevisionRow]{"revisions", verifyrows.Revisions, verifyrows.RevisionsScan,
		"record_revision", "record_id, revision", "created_at"})
	checkTable(t, b, since, table[verifyrows.ExecutionRow]{"executions", verifyrows.Executions, verifyrows.ExecutionsScan,
		"feature_execution", "id, 0", "updated_at"})
	checkTable(t, b, since, table[verifyrows.KeyRow]{"keys",
		func(ctx context.Context, db *store.DB, p verifyrows.Page) ([]verifyrows.KeyRow, error) {
			return verifyrows.Keys(ctx, db, kernel.ResultRefs, p, true) // the light columns: what the scan reads
		},
		func(ctx context.Context, db *store.DB, s verifyrows.Scope, fn func(verifyrows.KeyRow) error) error {
			return verifyrows.KeysScan(ctx, db, kernel.ResultRefs, s, fn)
		},
		"idempotency_record", "idempotency_key, 0", "updated_at"})
	checkTable(t, b, since, table[verifyrows.OutboxRow]{"outbox", verifyrows.Outbox, verifyrows.OutboxScan, "outbox_message", "id, 0", "updated_at"})
	checkTable(t, b, since, table[verifyrows.AuditRow]{"audit", verifyrows.Audit, verifyrows.AuditScan, "audit_event", "id, 0", "at"})
}

// The pages and the scan say the same things of the rows because those things are there to say:
// the columns the equality above compares are read, not left zero by both. A key row comes with
// the rows its result references (the light read without their content, the full one with it);
// a revision with its parent, its predecessor's digest and its write's audit event; an
// execution with its run's audit event and its outbox message.
func TestTheRowsComeWithWhatTheyReference(t *testing.T) {
	t.Parallel()
	b, _ := history(t)
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
func lifePages(t *testing.T, ctx context.Context, db *store.DB, p verifyrows.Page) (all []verifyrows.KeyLives) {
	t.Helper()
	limit := p.Limit
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
	b, since := history(t)
	for _, owner := range []string{"", "bob", "nobody"} {
		scoped := ` AND ($1 = '' OR owner_id = $1)`
		var union []string
		for _, tb := range []string{"record_revision", "feature_execution", "commitment_review", "outbox_message", "audit_event"} {
			union = append(union, `SELECT owner_id, idempotency_key FROM `+tb+` WHERE idempotency_key IS NOT NULL`+scoped)
		}
		// A key's lives are its rows of every table but the outbox worker's settle events.
		wantKeys := cursors(t, b, `SELECT owner_id, idempotency_key, 0 FROM (`+strings.Join(union, " UNION ")+`
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
				require.Equal(t, scanned, lifePages(t, ctx, b.DB.DB, verifyrows.Page{Owner: owner, Limit: limit}), "the lives of %q in pages of %d", owner, limit)
			}
			// Since a time, the pages are cut by the keys with an audit event since then (the
			// outbox worker's settles included): they hold each of those keys and the owner's
			// other keys before it, each once, in key order, with all its lives as the scan
			// reads them (the older ones too: the caller judges them), and none of an owner
			// without such an event.
			recentKeys := cursors(t, b, `SELECT DISTINCT owner_id, idempotency_key, 0 FROM audit_event
				WHERE idempotency_key IS NOT NULL AND at >= $2`+scoped+` ORDER BY 1, 2`, owner, since)
			require.Equal(t, owner == "nobody", len(recentKeys) == 0)
			for _, limit := range []int{1, 2, 1000} {
				paged := lifePages(t, ctx, b.DB.DB, verifyrows.Page{Owner: owner, Limit: limit, Since: since})
				next, found := 0, 0
				for _, k := range paged {
					i := slices.IndexFunc(scanned[next:], func(s verifyrows.KeyLives) bool { return s.OwnerID == k.OwnerID && s.Key == k.Key })
					require.GreaterOrEqual(t, i, 0, "since, in pages of %d: %s/%s is no key of %q's after the page's last", limit, k.OwnerID, k.Key, owner)
					next += i
					require.Equal(t, scanned[next], k, "since, in pages of %d: as the scan reads it", limit)
					next++
					require.NotEqual(t, "alice", k.OwnerID, "alice wrote nothing since")
					if found < len(recentKeys) && recentKeys[found] == (verifyrows.Cursor{Owner: k.OwnerID, ID: k.Key}) {
						found++
					}
				}
				require.Equal(t, len(recentKeys), found, "since, in pages of %d: every key of %q with an audit event since", limit, owner)
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
