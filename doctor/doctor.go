// Package doctor examines the database idemwork would use and says whether writes are safe
// there: what server answers and where (the node a multi-host URL chose), what stands in front
// of it (a pooler declared or detected), the schema and its migrations, the role's privileges,
// and how a commit survives a failover (replication). Each finding that makes writes unsafe is
// a reason; `idemwork doctor` exits 0 without one, 3 with them.
//
// The fixed parts of the report are SPEC §10.2's; a Section adds one of its own (the HA
// formation a pg_auto_failover monitor describes, say) under a key of the report, with its own
// reasons, without changing the rest.
package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/migrations"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/dbfacts"
)

// Report is what doctor found. Its JSON is `idemwork doctor --json`'s object (SPEC §10.2).
type Report struct {
	// Server is the server's product and version ("PostgreSQL 15.18").
	Server string `json:"server"`
	// Host and Port are the node actually connected (after a multi-host URL's choice, and after
	// a failover the node new connections reach); behind a pooler, the pooler's address.
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Database string `json:"database"`
	Pooler   Pooler `json:"pooler"`
	Schema   string `json:"schema"`
	// SearchPath is what every transaction of idemwork's sets.
	SearchPath     string             `json:"searchPath"`
	ReadOnly       bool               `json:"readOnly"`
	ReadOnlyReason *string            `json:"readOnlyReason"`
	Migrations     Migrations         `json:"migrations"`
	Privileges     dbfacts.Privileges `json:"privileges"`
	Replication    Replication        `json:"replication"`
	// WritesSafe is true when nothing found makes a write unsafe; Reasons say what does.
	WritesSafe bool     `json:"writesSafe"`
	Reasons    []string `json:"reasons"`
	// Sections are the extra parts (by key), each as its Section returned it.
	Sections map[string]any `json:"-"`
}

// Pooler is what stands between idemwork and the server.
type Pooler struct {
	// Declared is the pooler the configuration names ("none", "session", "transaction"; "" when
	// nothing does).
	Declared string `json:"declared"`
	// Detected: a pooler answered the connection (its backend key is not the server's process id).
	Detected bool `json:"detected"`
	// ExecMode is the pgx exec mode in use.
	ExecMode string `json:"execMode"`
}

// Migrations is the schema's state for this binary.
type Migrations struct {
	Current bool    `json:"current"`
	Applied []int64 `json:"applied"`
	Pending []int64 `json:"pending"`
	Unknown []int64 `json:"unknown"`
	// Problem says what is wrong and what to run ("" when current).
	Problem string `json:"problem"`
}

// Replication is how an acknowledged commit survives a failover (SPEC §10.2's synchronous,
// standbys and risk, and what they were judged from).
type Replication struct {
	// InRecovery: the server is a hot standby (replication is the primary's to report).
	InRecovery  bool `json:"inRecovery"`
	Synchronous bool `json:"synchronous"`
	// Standbys are the attached standbys; SyncStandbys those that confirm commits.
	Standbys                int    `json:"standbys"`
	SyncStandbys            int    `json:"syncStandbys"`
	Risk                    string `json:"risk"`
	SynchronousCommit       string `json:"synchronousCommit"`
	SynchronousStandbyNames string `json:"synchronousStandbyNames"`
	// Visible: the role may read pg_stat_replication's details; without them idemwork cannot
	// tell a synchronous standby from an asynchronous one.
	Visible bool `json:"visible"`
	// Required: require_synchronous_replication is set (writes refused while not Synchronous).
	Required bool `json:"required"`
}

// A Section is a part of the report beyond SPEC §10.2's fixed ones.
type Section interface {
	// Key is the section's key in the report's JSON.
	Key() string
	// Inspect reads what the section reports and returns it (as JSON will show it) with the
	// reasons it finds that writes are not safe.
	Inspect(ctx context.Context, db *store.DB) (value any, reasons []string, err error)
}

// Examine reads the report on db, then each section's part.
func Examine(ctx context.Context, db *store.DB, database string, sections ...Section) (Report, error) {
	cn := db.Connection()
	repl, err := db.ReadReplication(ctx)
	if err != nil {
		return Report{}, err
	}
	privs, err := dbfacts.ReadPrivileges(ctx, db)
	if err != nil {
		return Report{}, err
	}
	st, err := db.ReadSchemaState(ctx)
	if err != nil {
		return Report{}, store.TranslateError(err)
	}
	declared := ""
	if cn.PoolerDeclared {
		declared = string(cn.Pooler)
	}
	r := Report{
		Server: "PostgreSQL " + cn.ServerVersion, Host: repl.Host, Port: repl.Port, Database: database,
		Pooler: Pooler{Declared: declared, Detected: cn.PoolerDetected, ExecMode: cn.ExecMode},
		Schema: cn.Schema, SearchPath: cn.SearchPath, ReadOnly: db.ReadOnly,
		Migrations: migrationsOf(st), Privileges: privs,
		Replication: Replication{InRecovery: repl.InRecovery, Synchronous: repl.Synchronous, Standbys: repl.Standbys, SyncStandbys: repl.SyncStandbys, Risk: repl.Risk,
			SynchronousCommit: repl.SynchronousCommit, SynchronousStandbyNames: repl.SynchronousStandbyNames, Visible: repl.Visible,
			Required: db.RequiresSynchronousReplication()},
		Reasons: []string{}, Sections: map[string]any{},
	}
	if why := db.ReadOnlyReason(); why != "" {
		r.ReadOnlyReason = &why
	}
	r.Reasons = r.reasons(repl)
	for _, s := range sections {
		v, reasons, err := s.Inspect(ctx, db)
		if err != nil {
			return r, fmt.Errorf("doctor: %s: %w", s.Key(), err)
		}
		r.Sections[s.Key()] = v
		r.Reasons = append(r.Reasons, reasons...)
	}
	r.WritesSafe = len(r.Reasons) == 0
	return r, nil
}

// reasons are the findings of the fixed parts that make a write unsafe (a session opened
// read-only on purpose is not one: doctor reports on the database).
func (r Report) reasons(repl store.Replication) []string {
	out := []string{}
	if repl.InRecovery {
		out = append(out, "the server is a hot standby: writes go to the primary (list every node in the URL with "+
			"target_session_attrs=read-write to reach it)")
	}
	if !r.Migrations.Current {
		out = append(out, "the schema: "+r.Migrations.Problem)
	}
	if !r.Privileges.Write {
		out = append(out, fmt.Sprintf("role %s lacks what writing needs: %s", r.Privileges.Role, strings.Join(r.Privileges.Missing, "; ")))
	}
	if repl.AtRisk() {
		out = append(out, "replication: "+repl.Risk)
	}
	if r.Replication.Required && !repl.Synchronous {
		out = append(out, "require_synchronous_replication is set and no synchronous standby confirms commits: every write is refused "+
			"with "+string(apperr.ReplicationUnsafe))
	}
	return out
}

func migrationsOf(st migrations.State) Migrations {
	m := Migrations{Current: st.Current(), Applied: append([]int64{}, st.Applied...), Pending: []int64{}, Unknown: append([]int64{}, st.Unknown...),
		Problem: st.Problem()}
	for _, p := range st.Pending {
		m.Pending = append(m.Pending, p.Version)
	}
	return m
}

// MarshalJSON writes the fixed parts in their order, then each section under its key (in
// the keys' order).
func (r Report) MarshalJSON() ([]byte, error) {
	type fixed Report
	b, err := json.Marshal(fixed(r))
	if err != nil || len(r.Sections) == 0 {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(r.Sections))
	for k := range r.Sections {
		if _, taken := m[k]; taken {
			return nil, fmt.Errorf("doctor: section %q would replace a part of the report", k)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := bytes.TrimSuffix(b, []byte("}"))
	for _, k := range keys {
		name, _ := json.Marshal(k)
		raw, err := json.Marshal(r.Sections[k])
		if err != nil {
			return nil, err
		}
		out = append(append(append(append(out, ','), name...), ':'), raw...)
	}
	return append(out, '}'), nil
}
