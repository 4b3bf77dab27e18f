package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// SPEC §13 and docs/scaling.md: the schema is ready for a distributed PostgreSQL that shards by
// owner_id (Citus's model). These tests read what the database and the runner actually do, so
// a migration or a statement that breaks the layout fails here, not on a cluster.

// referenceTables are the tables that are not distributed by owner: small tables of the
// deployment itself, which Citus would keep as reference (or local) tables.
var referenceTables = map[string]string{
	"data_migration_ledger": "one row per data migration of the deployment",
	"goose_db_version":      "the schema version goose applied",
}

// Every table but the reference tables has owner_id, and every primary key, unique constraint,
// exclusion constraint, unique index and foreign key leads with it — a foreign key from the
// owner_id of one table to the owner_id of the other — so each constraint is enforced within
// one shard, and the tables are co-located by owner.
func TestEveryKeyOfADistributedTableLeadsWithOwnerID(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	q := func(sql string) [][]any {
		rows, err := db.Pool.Query(ctx, sql)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]any, error) { return r.Values() })
		require.NoError(t, err)
		return out
	}
	tables := map[string]bool{} // table → has owner_id
	for _, r := range q(`SELECT c.relname, EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'owner_id' AND NOT a.attisdropped)
		FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')`) {
		tables[r[0].(string)] = r[1].(bool)
	}
	require.Contains(t, tables, "idempotency_record", "the schema is read where the tables are")
	var broken []string
	for name, hasOwner := range tables {
		if _, ok := referenceTables[name]; ok {
			continue
		}
		if !hasOwner {
			broken = append(broken, fmt.Sprintf("table %s has no owner_id: distribute it by owner or list it as a reference table (with why) in referenceTables", name))
		}
	}
	// Each constraint's columns in key order, and for a foreign key the referenced ones.
	for _, r := range q(`SELECT con.conname, con.contype::text, rel.relname,
			(SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(con.conkey) WITH ORDINALITY k(n, ord)
				JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n),
			coalesce((SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(con.confkey) WITH ORDINALITY k(n, ord)
				JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.n), '{}'),
			coalesce(ref.relname, '')
		FROM pg_constraint con JOIN pg_class rel ON rel.oid = con.conrelid
		LEFT JOIN pg_class ref ON ref.oid = con.confrelid
		WHERE rel.relnamespace = current_schema()::regnamespace AND con.contype IN ('p', 'u', 'f', 'x')`) {
		name, kind, table := r[0].(string), r[1].(string), r[2].(string)
		cols, refCols, refTable := strs(r[3]), strs(r[4]), r[5].(string)
		if _, ok := referenceTables[table]; ok {
			if kind == "f" {
				broken = append(broken, fmt.Sprintf("%s: reference table %s refers to %s; a reference table refers only to reference tables", name, table, refTable))
			}
			continue
		}
		if len(cols) == 0 || cols[0] != "owner_id" {
			broken = append(broken, fmt.Sprintf("%s on %s%v does not lead with owner_id", name, table, cols))
		}
		if kind == "f" && (len(refCols) == 0 || refCols[0] != "owner_id") {
			broken = append(broken, fmt.Sprintf("foreign key %s on %s%v refers to %s%v, not from owner_id to owner_id", name, table, cols, refTable, refCols))
		}
		if _, ok := referenceTables[refTable]; ok && kind == "f" {
			broken = append(broken, fmt.Sprintf("foreign key %s: %s refers to reference table %s", name, table, refTable))
		}
	}
	// Unique indexes made without a constraint enforce uniqueness too.
	for _, r := range q(`SELECT i.relname, t.relname, (SELECT array_agg(coalesce(a.attname::text, '(expression)') ORDER BY k.ord)
			FROM unnest(x.indkey::int2[]) WITH ORDINALITY k(n, ord) LEFT JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.n)
		FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
		WHERE t.relnamespace = current_schema()::regnamespace AND x.indisunique
			AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)`) {
		index, table, cols := r[0].(string), r[1].(string), strs(r[2])
		if _, ok := referenceTables[table]; ok {
			continue
		}
		if len(cols) == 0 || cols[0] != "owner_id" {
			broken = append(broken, fmt.Sprintf("unique index %s on %s%v does not lead with owner_id", index, table, cols))
		}
	}
	sort.Strings(broken)
	require.Empty(t, broken, "docs/scaling.md: every key of a table distributed by owner leads with owner_id")
}

func strs(v any) []string {
	var out []string
	if a, ok := v.([]any); ok {
		for _, x := range a {
			out = append(out, fmt.Sprint(x))
		}
	}
	return out
}

// Every statement of the write and replay path — creates, patches, feature runs of every mode
// and a review, keyed and not, a replay, a reservation over an expired key — touches only rows
// of the request's owner: in its generic plan each scan of a distributed table is bound to one
// and the same parameter by owner_id = $n (directly, or by owner_id joins to a scan that is),
// and each insert writes owner_id from that parameter. A distributed PostgreSQL routes such a
// statement to the one shard holding the owner, whatever the values.
func TestTheWriteAndReplayPathRoutesEachStatementToOneOwner(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tr := &statements{}
	sdb, err := store.Open(ctx, db.DSN, store.Options{MaxConns: 2, Tracer: tr})
	require.NoError(t, err)
	t.Cleanup(sdb.Close)
	clock := &idem.OffsetClock{}
	k := kernel.New(sdb, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{Runner: idem.Options{Clock: clock}})
	no := false
	title := "patched"

	// Records to act on, made before the trace starts.
	note, err := k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Title: "n", ShareInFlight: &no})
	require.NoError(t, err)
	mem, err := k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleMem, Title: "m",
		Payload: json.RawMessage(`{"originalContent":"a memo","currentContent":"a memo"}`), ShareInFlight: &no})
	require.NoError(t, err)
	promise, err := k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleCommitment, Title: "p",
		Payload: json.RawMessage(`{"status":"OPEN"}`), ShareInFlight: &no})
	require.NoError(t, err)
	tr.take()

	ops := []struct {
		name string
		run  func() error
	}{
		{"keyed create", func() error {
			_, err := k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "c1", Title: "t", ShareInFlight: &no})
			return err
		}},
		{"replay", func() error {
			_, err := k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "c1", Title: "t", ShareInFlight: &no})
			return err
		}},
		{"unkeyed create", func() error {
			_, err := k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Title: "t", ShareInFlight: &no})
			return err
		}},
		{"keyed patch", func() error {
			_, err := k.Patch(ctx, model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: note.Record.ID, Key: "p1",
				ExpectRevision: 1, Title: &title, ShareInFlight: &no})
			return err
		}},
		{"unkeyed patch", func() error {
			_, err := k.Patch(ctx, model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: note.Record.ID,
				ExpectRevision: 2, Title: &title, ShareInFlight: &no})
			return err
		}},
		{"internal feature", func() error {
			_, err := k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleMem, RecordID: mem.Record.ID, FeatureID: "F01", Key: "f1", ShareInFlight: &no})
			return err
		}},
		{"blocked_external feature", func() error {
			_, err := k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleMem, RecordID: mem.Record.ID, FeatureID: "F02", Key: "f2", ShareInFlight: &no})
			return err
		}},
		{"outbox feature", func() error {
			_, err := k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleCommitment, RecordID: promise.Record.ID, FeatureID: "F02", Key: "f3", ShareInFlight: &no})
			return err
		}},
		{"feature replay", func() error {
			_, err := k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleCommitment, RecordID: promise.Record.ID, FeatureID: "F02", Key: "f3", ShareInFlight: &no})
			return err
		}},
		{"review", func() error {
			_, err := k.CreateReview(ctx, kernel.ReviewInput{Owner: "alice", RecordID: promise.Record.ID, Key: "r1", Verdict: "kept", Comment: "ok", ShareInFlight: &no})
			return err
		}},
		{"create over an expired key", func() error {
			clock.Advance(48 * time.Hour)
			defer clock.Reset()
			_, err := k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "c1", Title: "again", ShareInFlight: &no})
			return err
		}},
	}
	seen := map[string][]string{} // statement → the operations that sent it
	var order []string
	for _, op := range ops {
		require.NoError(t, op.run(), op.name)
		for _, sql := range tr.take() {
			if transactionControl.MatchString(sql) {
				continue
			}
			if _, ok := seen[sql]; !ok {
				order = append(order, sql)
			}
			seen[sql] = append(seen[sql], op.name)
		}
	}
	require.GreaterOrEqual(t, len(order), 10, "the trace saw the path's statements")

	conn, err := pgx.Connect(ctx, db.DSN)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var broken []string
	for i, sql := range order {
		t.Logf("checked: %s", strings.Join(strings.Fields(sql), " ")[:min(100, len(strings.Join(strings.Fields(sql), " ")))])
		if why := routesToOneOwner(t, conn, i, sql); why != "" {
			broken = append(broken, fmt.Sprintf("%s (sent by %s):\n%s", why, strings.Join(slices.Compact(seen[sql]), ", "), sql))
		}
	}
	require.Empty(t, broken, "docs/scaling.md: every statement of the write and replay path filters owner_id = $n")
}

// transactionControl matches what is not a statement on rows: BEGIN, COMMIT, ROLLBACK,
// savepoints, SET LOCAL and set_config.
var transactionControl = regexp.MustCompile(`(?is)^\s*(begin|commit|rollback|savepoint|release|set\s+local|select\s+set_config)\b`)

// distributed are the tables distributed by owner.
var distributed = map[string]bool{"record": true, "record_revision": true, "feature_execution": true, "audit_event": true,
	"idempotency_record": true, "outbox_message": true, "commitment_review": true}

var (
	pinRE  = regexp.MustCompile(`\b(?:(\w+)\.)?owner_id = \$(\d+)\b`)
	pinRE2 = regexp.MustCompile(`\$(\d+) = (?:(\w+)\.)?owner_id\b`)
	joinRE = regexp.MustCompile(`\b(\w+)\.owner_id = (\w+)\.owner_id\b`)
	insRE  = regexp.MustCompile(`(?is)^\s*(?:with\s+\w+\s+as\s*\(\s*)?insert\s+into\s+(\w+)\s*\(([^)]*)\)\s*(?:values\s*\(|select\s+)(.*)`)
)

// routesToOneOwner returns why sql would not route to one owner's shard ("" when it would):
// its generic plan's scans of distributed tables must all be pinned to one parameter through
// owner_id, and an insert must take owner_id from that parameter.
func routesToOneOwner(t *testing.T, conn *pgx.Conn, i int, sql string) string {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	name := "shard_check_" + strconv.Itoa(i)
	_, err = tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan")
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "PREPARE "+name+" AS "+sql)
	require.NoError(t, err, sql)
	var params int
	require.NoError(t, tx.QueryRow(ctx, `SELECT coalesce(cardinality(parameter_types), 0) FROM pg_prepared_statements WHERE name = $1`, name).Scan(&params))
	args := strings.TrimSuffix(strings.Repeat("NULL, ", params), ", ")
	var plan []map[string]any
	require.NoError(t, tx.QueryRow(ctx, "EXPLAIN (VERBOSE, FORMAT JSON) EXECUTE "+name+"("+args+")").Scan(&plan), sql)
	_, err = tx.Exec(ctx, "DEALLOCATE "+name)
	require.NoError(t, err)

	var nodes []node
	collectNodes(plan[0]["Plan"].(map[string]any), &nodes)
	// Union the aliases joined on owner_id (in any node's conditions); each group must be
	// pinned to a parameter, by a condition qualified with one of its aliases or by an
	// unqualified one on a scan of its own.
	parent := map[string]string{}
	var find func(string) string
	find = func(a string) string {
		if p, ok := parent[a]; ok && p != a {
			r := find(p)
			parent[a] = r
			return r
		}
		parent[a] = a
		return a
	}
	pins := map[string]map[string]bool{} // alias → parameters owner_id is bound to
	pin := func(alias, param string) {
		if pins[alias] == nil {
			pins[alias] = map[string]bool{}
		}
		pins[alias][param] = true
	}
	var touched []node
	for _, n := range nodes {
		if n.table != "" && distributed[n.table] {
			touched = append(touched, n)
			find(n.alias)
		}
		for _, m := range pinRE.FindAllStringSubmatch(n.cond, -1) {
			switch {
			case m[1] != "":
				pin(m[1], m[2])
			case n.table != "":
				pin(n.alias, m[2])
			}
		}
		for _, m := range pinRE2.FindAllStringSubmatch(n.cond, -1) {
			switch {
			case m[2] != "":
				pin(m[2], m[1])
			case n.table != "":
				pin(n.alias, m[1])
			}
		}
		for _, m := range joinRE.FindAllStringSubmatch(n.cond, -1) {
			parent[find(m[1])] = find(m[2])
		}
	}
	groupPins := map[string]map[string]bool{}
	for alias, ps := range pins {
		g := find(alias)
		if groupPins[g] == nil {
			groupPins[g] = map[string]bool{}
		}
		for p := range ps {
			groupPins[g][p] = true
		}
	}
	all := map[string]bool{}
	for _, n := range touched {
		ps := groupPins[find(n.alias)]
		if len(ps) == 0 {
			return fmt.Sprintf("the scan of %s (as %s) is not bound to one owner (its conditions: %q)", n.table, n.alias, n.cond)
		}
		for p := range ps {
			all[p] = true
		}
	}
	if m := insRE.FindStringSubmatch(sql); m != nil && distributed[strings.ToLower(m[1])] {
		cols := strings.Split(m[2], ",")
		vals := splitTop(m[3])
		at := slices.IndexFunc(cols, func(c string) bool { return strings.TrimSpace(c) == "owner_id" })
		if at < 0 || at >= len(vals) {
			return fmt.Sprintf("the insert into %s does not write owner_id from a parameter", m[1])
		}
		v := strings.TrimSpace(vals[at])
		if !regexp.MustCompile(`^\$\d+$`).MatchString(v) {
			return fmt.Sprintf("the insert into %s writes owner_id from %q, not from a parameter", m[1], v)
		}
		all[v[1:]] = true
	}
	if len(all) > 1 {
		return fmt.Sprintf("owner_id is bound to %d parameters (%v), not one: the statement names several owners", len(all), sortedParams(all))
	}
	return ""
}

// node is one node of a plan: its conditions, and for a scan the table and its alias.
type node struct{ table, alias, cond string }

func collectNodes(n map[string]any, out *[]node) {
	var conds []string
	for _, k := range []string{"Index Cond", "Recheck Cond", "Filter", "TID Cond", "Join Filter", "Hash Cond", "Merge Cond", "One-Time Filter"} {
		if c, ok := n[k].(string); ok {
			conds = append(conds, c)
		}
	}
	nd := node{cond: strings.Join(conds, " AND ")}
	if rel, ok := n["Relation Name"].(string); ok && n["Node Type"] != "ModifyTable" {
		nd.table, nd.alias = rel, rel
		if a, ok := n["Alias"].(string); ok && a != "" {
			nd.alias = a
		}
	}
	*out = append(*out, nd)
	if plans, ok := n["Plans"].([]any); ok {
		for _, p := range plans {
			collectNodes(p.(map[string]any), out)
		}
	}
}

// splitTop splits an insert's value list at its top-level commas.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			if depth == 0 {
				return append(out, s[start:i])
			}
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

func sortedParams(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for p := range m {
		out = append(out, "$"+p)
	}
	sort.Strings(out)
	return out
}

// statements is a pgx tracer that keeps every statement's full text, batches' included.
type statements struct {
	mu  sync.Mutex
	got []string
}

func (s *statements) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.got
	s.got = nil
	return out
}

func (s *statements) add(sql string) {
	s.mu.Lock()
	s.got = append(s.got, sql)
	s.mu.Unlock()
}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.add(d.SQL)
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	for _, q := range d.Batch.QueuedQueries {
		s.add(q.SQL)
	}
	return ctx
}

func (s *statements) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (s *statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
