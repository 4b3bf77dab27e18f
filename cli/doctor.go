package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/doctor"
	"github.com/idemwork/idemwork/internal/workbench"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/wire"
)

// codeWritesUnsafe is doctor's verdict when it found a reason writes are not safe.
const codeWritesUnsafe apperr.Code = "WRITES_UNSAFE"

func newDoctorCmd(a *app) *cobra.Command {
	return &cobra.Command{Use: "doctor", Short: "What idemwork finds about the database it would use (exit 0: writes are safe, 3: not, with the reasons)",
		Long: "doctor connects as every command does and reports the server and the node actually connected (after a\n" +
			"multi-host URL's choice), the pooler (declared in the configuration, detected on the connection) and the exec\n" +
			"mode, the schema and its migrations, whether the session is read-only and why, the role's privileges, and\n" +
			"replication: whether a synchronous standby confirms commits, how many standbys are attached, and the risk\n" +
			"to acknowledged keys on failover; then the cluster as the workbench's Cluster view reads it: a pg_auto_failover\n" +
			"formation's nodes, its primary and their states from its monitor (IDEMWORK_MONITOR, or found from the keeper of\n" +
			"the node connected when it runs on this machine), else the standbys the node connected reports. It only reads.\n" +
			"Exit 0 when writes are safe, 3 with the reasons when not.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			db, err := a.openDB(ctx, false)
			if err != nil {
				return err
			}
			r, err := doctor.Examine(ctx, db, a.conn.Database, clusterSection{monitor: a.getenv("IDEMWORK_MONITOR")})
			if err != nil {
				return err
			}
			if a.flags.json {
				writeJSON(a.stdout, r)
			} else {
				printDoctor(a.stdout, r)
			}
			if !r.WritesSafe {
				return &reportedError{&doctorVerdict{reasons: r.Reasons}}
			}
			return nil
		}}
}

// clusterSection is doctor's "cluster": the nodes behind the database as the Cluster view
// reads them (internal/workbench.Cluster) — the pg_auto_failover monitor's view of the
// formation where one is known and answers, else the connected node's pg_stat_replication.
type clusterSection struct{ monitor string }

func (clusterSection) Key() string { return "cluster" }

// Inspect reads the cluster. A monitor that names another node than the one connected as the
// settled primary, while the node connected takes writes, is a reason: it may be one the
// formation already demoted (a hot standby is a reason of its own already).
func (s clusterSection) Inspect(ctx context.Context, db *store.DB) (any, []string, error) {
	c, err := workbench.Cluster(db, s.monitor).Cluster(ctx)
	if err != nil {
		return nil, nil, err
	}
	reasons := []string{}
	if p, ok := c.Primary(); ok && c.Source == "monitor" && !p.Connected && !db.Replication().InRecovery {
		reasons = append(reasons, fmt.Sprintf("the pg_auto_failover monitor names %s (%s) as the primary, not the node connected (%s): "+
			"connect with the formation's URI (pg_autoctl show uri) so writes reach the primary", p.Name, p.Addr, c.Connected))
	}
	return doctorCluster{c}, reasons, nil
}

// doctorCluster is the cluster section, its JSON model.Cluster's, its text one line.
type doctorCluster struct{ model.Cluster }

func (c doctorCluster) String() string {
	var b strings.Builder
	if c.Source == "monitor" {
		fmt.Fprintf(&b, "pg_auto_failover monitor %s, formation %s:", c.Monitor, c.Formation)
	} else {
		b.WriteString("the connected node's view:")
	}
	for i, n := range c.Nodes {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " %s %s", n.Name, n.Addr)
		if role := n.Role; role != "" {
			fmt.Fprintf(&b, " %s", role)
		}
		if n.State != "" && n.State != n.Role {
			fmt.Fprintf(&b, " (%s)", n.State)
		}
		if n.Sync != "" {
			fmt.Fprintf(&b, " %s", n.Sync)
		}
		if n.LagBytes >= 0 {
			fmt.Fprintf(&b, " lag %d B", n.LagBytes)
		}
		if n.Healthy != nil && !*n.Healthy {
			b.WriteString(" unhealthy")
		}
		if n.Connected {
			b.WriteString(" [connected]")
		}
	}
	for _, note := range c.Notes {
		fmt.Fprintf(&b, "; note: %s", note)
	}
	return safe(b.String())
}

// doctorVerdict is doctor's exit when writes are not safe: 3, the reasons on stderr.
type doctorVerdict struct{ reasons []string }

func (e *doctorVerdict) Error() string { return string(codeWritesUnsafe) + ": " + e.msg() }
func (e *doctorVerdict) msg() string {
	return "writes are not safe on this database: " + strings.Join(e.reasons, "; ")
}
func (e *doctorVerdict) Coded() (apperr.Code, int, string, int) {
	return codeWritesUnsafe, http.StatusServiceUnavailable, e.msg(), wire.ExitRejected
}

// printDoctor writes the report for a person.
func printDoctor(w io.Writer, r doctor.Report) {
	row := func(k, format string, args ...any) { fmt.Fprintf(w, "%-12s %s\n", k, fmt.Sprintf(format, args...)) }
	where := r.Host
	if r.Port != 0 {
		where = fmt.Sprintf("%s port %d", r.Host, r.Port)
	}
	row("server", "%s at %s, database %s", safe(r.Server), safe(where), safe(r.Database))
	declared := r.Pooler.Declared
	if declared == "" {
		declared = "none declared"
	} else {
		declared += " (declared)"
	}
	detected := "no pooler answers (a direct connection)"
	if r.Pooler.Detected {
		detected = "a pooler answers (its backend key is not the server's process id)"
	}
	row("pooler", "%s; %s; exec mode %s", declared, detected, r.Pooler.ExecMode)
	row("schema", "%s (every transaction sets search_path = %s)", safe(r.Schema), safe(r.SearchPath))
	if r.ReadOnly {
		row("read-only", "yes: %s", safe(deref(r.ReadOnlyReason)))
	} else {
		row("read-only", "no")
	}
	if r.Migrations.Current {
		row("migrations", "current (%d applied)", len(r.Migrations.Applied))
	} else {
		row("migrations", "%s", safe(r.Migrations.Problem))
	}
	row("privileges", "%s", safe(r.Privileges.Summary()))
	repl := r.Replication
	kind := "asynchronous"
	switch {
	case repl.InRecovery:
		kind = "this is a hot standby (what commits wait for is the primary's to say)"
	case repl.Synchronous:
		kind = "synchronous"
	case !repl.Visible && repl.Standbys > 0:
		kind = "unknown (this role cannot read the standbys' sync_state)"
	case repl.Standbys == 0:
		kind = "no standby attached (nothing to fail over to)"
	}
	row("replication", "%s: %d standby(s) attached, %d confirming commits; synchronous_commit = %s, synchronous_standby_names = '%s'%s",
		kind, repl.Standbys, repl.SyncStandbys, safe(repl.SynchronousCommit), safe(repl.SynchronousStandbyNames),
		map[bool]string{true: "; require_synchronous_replication is set", false: ""}[repl.Required])
	if repl.Risk != "" {
		row("", "risk: %s", safe(repl.Risk))
	}
	for k, v := range r.Sections {
		row(k, "%v", v)
	}
	if r.WritesSafe {
		row("writes", "safe")
		return
	}
	row("writes", "NOT SAFE:")
	for _, why := range r.Reasons {
		fmt.Fprintf(w, "  - %s\n", safe(why))
	}
}
