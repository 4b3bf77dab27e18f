package cli

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/doctor"
)

// codeWritesUnsafe is doctor's verdict when it found a reason writes are not safe.
const codeWritesUnsafe apperr.Code = "WRITES_UNSAFE"

func newDoctorCmd(a *app) *cobra.Command {
	return &cobra.Command{Use: "doctor", Short: "What idemwork finds about the database it would use (exit 0: writes are safe, 3: not, with the reasons)",
		Long: "doctor connects as every command does and reports the server and the node actually connected (after a\n" +
			"multi-host URL's choice), the pooler (declared in the configuration, detected on the connection) and the exec\n" +
			"mode, the schema and its migrations, whether the session is read-only and why, the role's privileges, and\n" +
			"replication: whether a synchronous standby confirms commits, how many standbys are attached, and the risk\n" +
			"to acknowledged keys on failover. It only reads. Exit 0 when writes are safe, 3 with the reasons when not.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			db, err := a.openDB(ctx, false)
			if err != nil {
				return err
			}
			r, err := doctor.Examine(ctx, db, a.conn.Database)
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

// doctorVerdict is doctor's exit when writes are not safe: 3, the reasons on stderr.
type doctorVerdict struct{ reasons []string }

func (e *doctorVerdict) Error() string { return string(codeWritesUnsafe) + ": " + e.msg() }
func (e *doctorVerdict) msg() string {
	return "writes are not safe on this database: " + strings.Join(e.reasons, "; ")
}
func (e *doctorVerdict) Coded() (apperr.Code, int, string, int) {
	return codeWritesUnsafe, http.StatusServiceUnavailable, e.msg(), ExitRejected
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
