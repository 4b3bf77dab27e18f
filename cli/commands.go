package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/inspect"
	"github.com/idemwork/idemwork/internal/termsafe"
	"github.com/idemwork/idemwork/internal/ticket"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/readmodel"
	"github.com/idemwork/idemwork/wire"
)

// addCommands registers the kernel's commands.
func addCommands(root *cobra.Command, a *app) {
	root.AddCommand(newCreateCmd(a), newPatchCmd(a), newActionCmd(a), newReviewCmd(a),
		newRecordCmd(a), newKeysCmd(a), newKeyCmd(a), newHistoryCmd(a), newLegacyCmd(a), newDemoCmd(a))
	addMoreCommands(root, a)
}

// kernel opens the database (migrating it) and builds the kernel over it.
func (a *app) kernel(ctx context.Context) (*kernel.Kernel, error) {
	if a.k != nil {
		return a.k, nil
	}
	db, err := a.openDB(ctx, true)
	if err != nil {
		return nil, err
	}
	a.k = a.kernelOver(db)
	return a.k, nil
}

// kernelOver builds a runner and kernel over db as the config says (TTL, module rules).
func (a *app) kernelOver(db *store.DB) *kernel.Kernel {
	runner := idem.Options{TTL: a.cfg.Idempotency.TTL.Duration, Limits: idem.Limits{
		KeyMaxConns: a.cfg.Idempotency.KeyMaxConns, OwnerMaxConns: a.cfg.Idempotency.OwnerMaxConns,
		AcquireTimeout: a.cfg.Idempotency.AcquireTimeout.Duration}}
	return kernel.New(db, kernel.NewRegistry(kernel.NewRules(a.cfg.Modules.MEM001.MaxContentLength)), kernel.Options{Runner: runner})
}

// writer returns the kernel for a write command, refusing up front with READ_ONLY on a
// read-only session — a replay included, though it would only read: a write command never
// runs against a database the user did not open for writing.
func (a *app) writer(ctx context.Context) (*kernel.Kernel, error) {
	if err := a.loadConfig(); err != nil {
		return nil, err
	}
	if a.cfg.Database.URL != "" && !a.cfg.Database.AllowWrites {
		// Known before connecting: whatever the database holds (even no schema), a write on a
		// session not opened for writing is READ_ONLY. A hot standby has a reason of its own,
		// which wins: reconnecting with --allow-writes would only meet it.
		if db, err := a.openDB(ctx, false); err == nil && db.Connection().Standby {
			return nil, db.WriteRefusal()
		}
		return nil, apperr.New(apperr.ReadOnly, "this session is read-only; reconnect with --allow-writes (or allow_writes = true) to write")
	}
	k, err := a.kernel(ctx)
	if err != nil {
		return nil, err
	}
	if err := k.RequireWritable(); err != nil {
		return nil, err
	}
	return k, nil
}

// jsonFlag is a flag holding a JSON document; it is checked for syntax when parsed.
type jsonFlag struct {
	raw json.RawMessage
	set bool
}

func (j *jsonFlag) String() string { return string(j.raw) }
func (j *jsonFlag) Type() string   { return "JSON" }
func (j *jsonFlag) Set(s string) error {
	if !json.Valid([]byte(s)) {
		return fmt.Errorf("not valid JSON: %.60q", s)
	}
	j.raw, j.set = json.RawMessage(s), true
	return nil
}

func (j *jsonFlag) value() json.RawMessage {
	if !j.set {
		return nil
	}
	return j.raw
}

// optString returns a pointer to the flag's value when it was given.
func optString(cmd *cobra.Command, name string, v string) *string {
	if cmd.Flags().Changed(name) {
		return &v
	}
	return nil
}

func required(cmd *cobra.Command, names ...string) {
	for _, n := range names {
		_ = cmd.MarkFlagRequired(n)
	}
}

func (a *app) printWrite(res model.WriteResult, answer func(model.WriteResult) model.Response) {
	if a.flags.json {
		printBody(a.stdout, answer(res))
		return
	}
	key := "(no key)"
	if res.Key != nil {
		key = "key " + *res.Key
	}
	waited := ""
	if res.Waited {
		waited = " after waiting on the unique index"
	}
	fmt.Fprintf(a.stdout, "%s%s — %s, %s\n", res.Outcome, waited, res.Operation, key)
	if res.Record != nil {
		fmt.Fprintf(a.stdout, "record %s  %s  revision %d  %q\n", res.Record.ID, res.Record.ModuleCode, res.Record.Revision, res.Record.Title)
	}
	if res.Execution != nil {
		fmt.Fprintf(a.stdout, "execution %s  %s  mode %s  status %s\n", res.Execution.ID, res.Execution.FeatureID, res.Execution.Mode, res.Execution.Status)
	}
	if res.Envelope != nil {
		fmt.Fprintf(a.stdout, "envelope %s\n", res.Envelope)
	}
}

func newCreateCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "create", Short: "Create a record (operation <MODULE>:record:create)", Args: cobra.NoArgs}
	r := bindCreate(cmd, "Idempotency-Key (none: runs without idempotency)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return a.runWrite(cmd, wire.Created, func(ctx context.Context, k *kernel.Kernel) (model.WriteResult, error) {
			return k.Create(ctx, r.input(cmd))
		})
	}
	return cmd
}

func newPatchCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "patch", Short: "Write the next revision of a record (optimistic lock on --expect-revision)", Args: cobra.NoArgs}
	r := bindPatch(cmd, "Idempotency-Key")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return a.runWrite(cmd, wire.Written, func(ctx context.Context, k *kernel.Kernel) (model.WriteResult, error) {
			return k.Patch(ctx, r.input(cmd))
		})
	}
	return cmd
}

func newActionCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "action", Short: "Run a feature of a record", Args: cobra.NoArgs}
	r := bindAction(cmd, "Idempotency-Key")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return a.runWrite(cmd, wire.Written, func(ctx context.Context, k *kernel.Kernel) (model.WriteResult, error) {
			return k.RunFeature(ctx, r.request(cmd))
		})
	}
	return cmd
}

func newReviewCmd(a *app) *cobra.Command {
	var in kernel.ReviewInput
	cmd := &cobra.Command{Use: "review", Short: "Review a COMMITMENT record (kept or missed)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := a.writer(cmd.Context())
			if err != nil {
				return err
			}
			res, err := k.CreateReview(cmd.Context(), in)
			if err != nil {
				return err
			}
			if a.flags.json {
				printBody(a.stdout, wire.Write(http.StatusCreated, res.Outcome, res.Waited, res))
				return nil
			}
			fmt.Fprintf(a.stdout, "%s — %s\nreview %s  %s  of revision %d\n", res.Outcome, res.Operation, res.Review.ID, res.Review.Verdict, res.Review.RecordRevision)
			return nil
		}}
	f := cmd.Flags()
	f.StringVar(&in.Owner, "owner", "", "owner id")
	f.StringVar(&in.RecordID, "record", "", "COMMITMENT record id")
	f.Var((*keyFlag)(&in.Key), "key", "Idempotency-Key")
	f.StringVar(&in.Verdict, "verdict", "", "kept or missed")
	f.StringVar(&in.Comment, "comment", "", "comment (never stored in the envelope)")
	required(cmd, "owner", "record", "verdict", "comment")
	return cmd
}

func newRecordCmd(a *app) *cobra.Command {
	var owner, module, id string
	cmd := &cobra.Command{Use: "record", Short: "Show a record with its revisions, executions and audit events", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := idemtype.ValidateOwner(owner); err != nil {
				return err
			}
			if err := kernel.CheckRecordID(id); err != nil {
				return err
			}
			db, err := a.openDB(cmd.Context(), true)
			if err != nil {
				return err
			}
			d, err := readmodel.GetRecordDetail(cmd.Context(), db, store.RecordRef{Owner: owner, Module: module, ID: id})
			if err != nil {
				return err
			}
			if a.flags.json {
				writeJSON(a.stdout, d)
				return nil
			}
			// Text mode goes to a terminal: every stored string is shown terminal-safe.
			r := d.Record
			fmt.Fprintf(a.stdout, "%s %s  revision %d  %s\n", safe(r.ModuleCode), safe(r.ID), r.Revision, termsafe.Quote(r.Title))
			for _, rv := range d.Revisions {
				fmt.Fprintf(a.stdout, "  rev %-3d %s  key %s\n", rv.Revision, rv.CreatedAt.Format("2006-01-02 15:04:05"), safe(deref(rv.IdempotencyKey)))
			}
			for _, e := range d.Executions {
				fmt.Fprintf(a.stdout, "  exec %s %s %s %s  key %s\n", safe(e.ID), safe(e.FeatureID), safe(e.Mode), safe(e.Status), safe(deref(e.IdempotencyKey)))
			}
			for _, ev := range d.Audit {
				fmt.Fprintf(a.stdout, "  audit %s %s key %s\n", ev.At.Format("15:04:05.000"), safe(ev.Action), safe(deref(ev.IdempotencyKey)))
			}
			return nil
		}}
	f := cmd.Flags()
	f.StringVar(&owner, "owner", "", "owner id")
	f.StringVar(&module, "module", "", "module code")
	f.StringVar(&id, "record", "", "record id")
	required(cmd, "owner", "module", "record")
	return cmd
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

// safe is a stored string as one terminal-safe line (internal/termsafe).
func safe(s string) string { return termsafe.Line(s) }

// keyListItem is one row of `keys` (SPEC §10.2).
type keyListItem struct {
	Key       string  `json:"key"`
	Operation string  `json:"operation"`
	Status    string  `json:"status"`
	Policy    *string `json:"policy"`
	CreatedAt string  `json:"createdAt"`
	ExpiresAt string  `json:"expiresAt"`
	// Expired is true once expiresAt has passed: the next request with the key executes again.
	Expired bool `json:"expired"`
}

func newKeysCmd(a *app) *cobra.Command {
	var owner, cursor, prefix string
	var limit int
	cmd := &cobra.Command{Use: "keys", Short: "List the idempotency keys of an owner, every status (newest first; with --prefix in key order)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := idemtype.ValidateOwner(owner); err != nil {
				return err
			}
			if err := checkLimit(limit, true); err != nil {
				return err
			}
			k, err := a.kernel(cmd.Context())
			if err != nil {
				return err
			}
			rows, next, err := readmodel.Keys(cmd.Context(), k.DB(), model.KeyQuery{Owner: owner, Prefix: prefix, Limit: limit, Cursor: cursor})
			if err != nil {
				return err
			}
			now := k.Runner().Clock().Now()
			items := make([]keyListItem, 0, len(rows))
			var unreadable []bool
			for _, r := range rows {
				it := keyListItem{Key: r.Key, Operation: r.Operation, Status: r.Status,
					CreatedAt: r.CreatedAt.Format(timeJSON), ExpiresAt: r.ExpiresAt.Format(timeJSON), Expired: !r.ExpiresAt.After(now)}
				if r.Response != nil {
					if env, err := idemtype.ParseEnvelope(r.Response); err == nil {
						it.Policy = &env.Policy
					}
				}
				items = append(items, it)
				unreadable = append(unreadable, r.Response != nil && it.Policy == nil)
			}
			if a.flags.json {
				writeJSON(a.stdout, map[string]any{"keys": items, "next": nullable(next)})
				return nil
			}
			for i, it := range items {
				pol := "-"
				if it.Policy != nil {
					pol = *it.Policy
				}
				if unreadable[i] {
					pol = "(unreadable envelope)"
				}
				status := it.Status
				if it.Expired {
					status += " (expired)"
				}
				fmt.Fprintf(a.stdout, "%-28s %-22s %-30s %s\n", safe(it.Key), status, safe(pol), safe(it.Operation))
			}
			if next != "" {
				fmt.Fprintf(a.stdout, "more: --cursor %s\n", next)
			}
			return nil
		}}
	f := cmd.Flags()
	f.StringVar(&owner, "owner", "", "owner id")
	f.StringVar(&prefix, "prefix", "", "only keys starting with this (listed A→Z)")
	f.IntVar(&limit, "limit", 50, "page size (at most 500)")
	f.StringVar(&cursor, "cursor", "", "continue after a previous page (its next)")
	required(cmd, "owner")
	return cmd
}

const timeJSON = "2006-01-02T15:04:05.999999Z07:00"

// checkLimit refuses a --limit outside 1–readmodel.MaxPage for a page (or below 1 for an export,
// which has no ceiling): 0 and -1 once returned everything with exit 0.
func checkLimit(limit int, page bool) error {
	switch {
	case page && (limit < 1 || limit > readmodel.MaxPage):
		return usagef("--limit: want a page of 1-%d entries, got %d (--cursor continues with the next page)", readmodel.MaxPage, limit)
	case limit < 1:
		return usagef("--limit: want at least 1 entry to export, got %d (leave it out to export everything)", limit)
	}
	return nil
}

func newKeyCmd(a *app) *cobra.Command {
	var owner, key, format string
	cmd := &cobra.Command{Use: "key", Short: "Show one key: its verdict, envelope, the response a retry gets, and its rows",
		Long: "key shows one idempotency key: first the verdict its rows give (executed once, ran again after it\n" +
			"expired, ran twice, tampered, PROCESSING, expired), then the stored envelope, the restored result and the\n" +
			"latest record, the response a retry gets now, and the key's rows life by life (one transaction each).\n" +
			"--format md writes all of it as Markdown for a support ticket, --format json as --json prints it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "" && format != ticket.FormatMarkdown && format != ticket.FormatJSON {
				return usagef("--format: want md or json, got %q", format)
			}
			if format == ticket.FormatMarkdown && a.flags.json {
				return usagef("--format md and --json: choose one")
			}
			k, err := a.kernel(cmd.Context())
			if err != nil {
				return err
			}
			inspectKey := func(ctx context.Context, owner, key string) (model.KeyView, error) {
				return inspect.Key(ctx, k, owner, key)
			}
			if svc, err := a.service(cmd.Context()); err != nil {
				return err
			} else if svc != nil {
				inspectKey = svc.InspectKey // a service's key: restored through its plugin, else its reference
			}
			v, err := inspectKey(cmd.Context(), owner, key)
			if err != nil {
				return err
			}
			switch {
			case format == ticket.FormatMarkdown:
				return ticket.Markdown(a.stdout, v, ticket.Meta{Owner: owner, Database: a.conn.Display + "/" + a.conn.Database, At: time.Now()})
			case a.flags.json || format == ticket.FormatJSON:
				writeJSON(a.stdout, v)
				return nil
			}
			printKeyView(a.stdout, v)
			return nil
		}}
	f := cmd.Flags()
	f.StringVar(&owner, "owner", "", "owner id")
	f.StringVar(&key, "key", "", "Idempotency-Key")
	f.StringVar(&format, "format", "", "md: a Markdown export for a support ticket; json: as --json")
	required(cmd, "owner", "key")
	return cmd
}

func newHistoryCmd(a *app) *cobra.Command {
	var q model.HistoryQuery
	var format string
	cmd := &cobra.Command{Use: "history", Short: "An owner's merged timeline (audit, executions, keys, revisions), oldest first", Args: cobra.NoArgs,
		Long: "An owner's merged timeline, one keyset page at a time (--limit, --cursor), or the whole of it\n" +
			"streamed with --format json|csv (for a support ticket: nothing is held in memory but one page).\n" +
			"--key lists one key's whole story (every life), --key-prefix the keys starting with it (key\n" +
			"order, then time), --action the audit events whose action starts with it.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := idemtype.ValidateOwner(q.Owner); err != nil {
				return err
			}
			if q.Key != "" {
				if err := idemtype.ValidateKey(q.Key); err != nil {
					return err
				}
			}
			if err := checkLimit(q.Limit, format == ""); err != nil {
				return err
			}
			var exportFormat model.ExportFormat
			if format != "" {
				f, err := readmodel.ParseExportFormat(format)
				if err != nil {
					return usagef("--format: %q is not json or csv", format)
				}
				if f == model.ExportCSV && a.flags.json {
					return usagef("--format csv prints CSV, not a JSON object: drop --json")
				}
				exportFormat = f
			}
			db, err := a.openDB(cmd.Context(), true)
			if err != nil {
				return err
			}
			if exportFormat != "" {
				max := 0
				if cmd.Flags().Changed("limit") {
					max = q.Limit
				}
				w := &countingWriter{w: a.stdout}
				if _, err := readmodel.ExportHistory(cmd.Context(), db, q, exportFormat, w, max, nil); err != nil {
					if w.n > 0 {
						// Part of the export is already out: another object would break it.
						return &reportedError{err}
					}
					return err
				}
				return nil
			}
			events, next, err := readmodel.Timeline(cmd.Context(), db, q)
			if err != nil {
				return err
			}
			if a.flags.json {
				writeJSON(a.stdout, map[string]any{"events": events, "next": nullable(next)})
				return nil
			}
			for _, e := range events {
				what := strings.TrimSpace(strings.Join([]string{deref(e.Action), deref(e.Status), deref(e.Operation)}, " "))
				fmt.Fprintf(a.stdout, "%s  %-9s %-28s %-24s %s\n", e.At.Format("2006-01-02 15:04:05.000"), e.Kind, safe(e.ID), safe(deref(e.Key)),
					safe(strings.ReplaceAll(what, "- ", "")))
			}
			if next != "" {
				fmt.Fprintf(a.stdout, "more: --cursor %s\n", next)
			}
			return nil
		}}
	f := cmd.Flags()
	f.StringVar(&q.Owner, "owner", "", "owner id")
	f.IntVar(&q.Limit, "limit", 50, "page size (at most 500); with --format, the most entries to export (default all)")
	f.StringVar(&q.Cursor, "cursor", "", "continue after a previous page (its next)")
	f.BoolVar(&q.Desc, "desc", false, "newest first")
	f.StringVar(&q.Key, "key", "", "only this Idempotency-Key's entries: its whole story")
	f.StringVar(&q.KeyPrefix, "key-prefix", "", "only the entries of keys starting with this (key order, then time)")
	f.StringVar(&q.ActionPrefix, "action", "", "only the audit events whose action starts with this (e.g. FEATURE_ or RECORD_PATCHED)")
	f.StringVar(&format, "format", "", "json or csv: stream the whole selection (keyset pages), not one page")
	required(cmd, "owner")
	return cmd
}

// countingWriter counts what was written, so a failure can tell whether output had begun.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func newLegacyCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "legacy", Short: "Verify and redact legacy IDENTITY receipts", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return usagef("legacy needs a subcommand: verify or redact") }}
	verify := &cobra.Command{Use: "verify", Short: "Check legacy receipts and record the verdict in the ledger", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := a.kernel(cmd.Context())
			if err != nil {
				return err
			}
			rep, err := k.VerifyLegacy(cmd.Context())
			if err != nil {
				return err
			}
			if rep.Status != "passed" {
				// The ledger now says failed; redact stays refused until a verify passes.
				return apperr.New(apperr.ValidationFailed, "%s failed: %s", rep.Name, strings.Join(rep.Problems, "; "))
			}
			if a.flags.json {
				writeJSON(a.stdout, rep)
			} else {
				fmt.Fprintf(a.stdout, "%s: %s (%d legacy receipt(s))\n", rep.Name, rep.Status, rep.Receipts)
			}
			return nil
		}}
	redact := &cobra.Command{Use: "redact", Short: "Delete identity:create raw-json-v1 receipts (after verify passed)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := a.kernel(cmd.Context())
			if err != nil {
				return err
			}
			n, err := k.RedactLegacy(cmd.Context())
			if err != nil {
				return err
			}
			if a.flags.json {
				writeJSON(a.stdout, map[string]any{"deleted": n})
			} else {
				fmt.Fprintf(a.stdout, "deleted %d legacy receipt(s)\n", n)
			}
			return nil
		}}
	cmd.AddCommand(verify, redact)
	return cmd
}
