package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"idemwork/apperr"
	"idemwork/idem"
	"idemwork/kernel"
	"idemwork/store"
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
	runner := idem.NewRunner(db, idem.Options{TTL: a.cfg.Idempotency.TTL.Duration, Limits: idem.Limits{
		KeyMaxConns: a.cfg.Idempotency.KeyMaxConns, OwnerMaxConns: a.cfg.Idempotency.OwnerMaxConns,
		AcquireTimeout: a.cfg.Idempotency.AcquireTimeout.Duration}})
	return kernel.New(runner, kernel.NewRegistry(kernel.NewRules(a.cfg.Modules.MEM001.MaxContentLength)), kernel.Options{})
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
		// session not opened for writing is READ_ONLY.
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

func (a *app) printWrite(res kernel.WriteResult) {
	if a.flags.json {
		writeJSON(a.stdout, res)
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
		return a.runWrite(cmd, func(ctx context.Context, k *kernel.Kernel) (kernel.WriteResult, error) {
			return k.Create(ctx, r.input(cmd))
		})
	}
	return cmd
}

func newPatchCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "patch", Short: "Write the next revision of a record (optimistic lock on --expect-revision)", Args: cobra.NoArgs}
	r := bindPatch(cmd, "Idempotency-Key")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return a.runWrite(cmd, func(ctx context.Context, k *kernel.Kernel) (kernel.WriteResult, error) {
			return k.Patch(ctx, r.input(cmd))
		})
	}
	return cmd
}

func newActionCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "action", Short: "Run a feature of a record", Args: cobra.NoArgs}
	r := bindAction(cmd, "Idempotency-Key")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return a.runWrite(cmd, func(ctx context.Context, k *kernel.Kernel) (kernel.WriteResult, error) {
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
				writeJSON(a.stdout, res)
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
			if err := idem.ValidateOwner(owner); err != nil {
				return err
			}
			if err := kernel.CheckRecordID(id); err != nil {
				return err
			}
			db, err := a.openDB(cmd.Context(), true)
			if err != nil {
				return err
			}
			d, err := db.GetRecordDetail(cmd.Context(), owner, module, id)
			if err != nil {
				return err
			}
			if a.flags.json {
				writeJSON(a.stdout, d)
				return nil
			}
			r := d.Record
			fmt.Fprintf(a.stdout, "%s %s  revision %d  %q\n", r.ModuleCode, r.ID, r.Revision, r.Title)
			for _, rv := range d.Revisions {
				fmt.Fprintf(a.stdout, "  rev %-3d %s  key %s\n", rv.Revision, rv.CreatedAt.Format("2006-01-02 15:04:05"), deref(rv.IdempotencyKey))
			}
			for _, e := range d.Executions {
				fmt.Fprintf(a.stdout, "  exec %s %s %s %s\n", e.ID, e.FeatureID, e.Mode, e.Status)
			}
			for _, ev := range d.Audit {
				fmt.Fprintf(a.stdout, "  audit %s %s key %s\n", ev.At.Format("15:04:05.000"), ev.Action, deref(ev.IdempotencyKey))
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

// keyListItem is one row of `keys` (SPEC §10.2).
type keyListItem struct {
	Key       string  `json:"key"`
	Operation string  `json:"operation"`
	Status    string  `json:"status"`
	Policy    *string `json:"policy"`
	CreatedAt string  `json:"createdAt"`
	ExpiresAt string  `json:"expiresAt"`
}

func newKeysCmd(a *app) *cobra.Command {
	var owner, cursor string
	var limit int
	cmd := &cobra.Command{Use: "keys", Short: "List the idempotency keys of an owner (newest first)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := idem.ValidateOwner(owner); err != nil {
				return err
			}
			db, err := a.openDB(cmd.Context(), true)
			if err != nil {
				return err
			}
			rows, next, err := db.KeyPage(cmd.Context(), owner, limit, cursor)
			if err != nil {
				return err
			}
			items := make([]keyListItem, 0, len(rows))
			for _, r := range rows {
				it := keyListItem{Key: r.Key, Operation: r.Operation, Status: r.Status,
					CreatedAt: r.CreatedAt.Format(timeJSON), ExpiresAt: r.ExpiresAt.Format(timeJSON)}
				if r.Response != nil {
					if env, err := idem.ParseEnvelope(r.Response); err == nil {
						it.Policy = &env.Policy
					}
				}
				items = append(items, it)
			}
			if a.flags.json {
				writeJSON(a.stdout, map[string]any{"keys": items, "next": nullable(next)})
				return nil
			}
			for _, it := range items {
				pol := "-"
				if it.Policy != nil {
					pol = *it.Policy
				}
				fmt.Fprintf(a.stdout, "%-28s %-10s %-30s %s\n", it.Key, it.Status, pol, it.Operation)
			}
			if next != "" {
				fmt.Fprintf(a.stdout, "more: --cursor %s\n", next)
			}
			return nil
		}}
	f := cmd.Flags()
	f.StringVar(&owner, "owner", "", "owner id")
	f.IntVar(&limit, "limit", 50, "page size (at most 500)")
	f.StringVar(&cursor, "cursor", "", "continue after a previous page (its next)")
	required(cmd, "owner")
	return cmd
}

const timeJSON = "2006-01-02T15:04:05.999999Z07:00"

func newKeyCmd(a *app) *cobra.Command {
	var owner, key string
	cmd := &cobra.Command{Use: "key", Short: "Show one key: envelope, restored result and latest record", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := a.kernel(cmd.Context())
			if err != nil {
				return err
			}
			v, err := k.InspectKey(cmd.Context(), owner, key)
			if err != nil {
				return err
			}
			if a.flags.json {
				writeJSON(a.stdout, v)
				return nil
			}
			fmt.Fprintf(a.stdout, "key %s  %s  %s\nfingerprint %s\nexpires %s\nenvelope %s\n", v.Key, v.Status, v.Operation, v.Fingerprint,
				v.ExpiresAt.Format(timeJSON), v.Envelope)
			if v.Legacy {
				fmt.Fprintln(a.stdout, "legacy raw-json-v1 receipt: readable, never replayed")
			}
			if v.RestoreError != nil {
				fmt.Fprintf(a.stdout, "a replay fails closed: %s: %s\n", v.RestoreError.Code, v.RestoreError.Message)
			}
			if r := v.Restored.Record; r != nil {
				fmt.Fprintf(a.stdout, "a replay returns revision %d", r.Revision)
				if l := v.Latest.Record; l != nil {
					fmt.Fprintf(a.stdout, "; the latest is revision %d", l.Revision)
				}
				fmt.Fprintln(a.stdout)
			}
			return nil
		}}
	f := cmd.Flags()
	f.StringVar(&owner, "owner", "", "owner id")
	f.StringVar(&key, "key", "", "Idempotency-Key")
	required(cmd, "owner", "key")
	return cmd
}

func newHistoryCmd(a *app) *cobra.Command {
	var owner, cursor string
	var limit int
	var desc bool
	cmd := &cobra.Command{Use: "history", Short: "An owner's merged timeline (audit, executions, keys, revisions), oldest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := idem.ValidateOwner(owner); err != nil {
				return err
			}
			db, err := a.openDB(cmd.Context(), true)
			if err != nil {
				return err
			}
			events, next, err := db.History(cmd.Context(), owner, limit, cursor, desc)
			if err != nil {
				return err
			}
			if a.flags.json {
				writeJSON(a.stdout, map[string]any{"events": events, "next": nullable(next)})
				return nil
			}
			for _, e := range events {
				what := strings.TrimSpace(strings.Join([]string{deref(e.Action), deref(e.Status), deref(e.Operation)}, " "))
				fmt.Fprintf(a.stdout, "%s  %-9s %-28s %s\n", e.At.Format("2006-01-02 15:04:05.000"), e.Kind, e.ID, strings.ReplaceAll(what, "- ", ""))
			}
			if next != "" {
				fmt.Fprintf(a.stdout, "more: --cursor %s\n", next)
			}
			return nil
		}}
	f := cmd.Flags()
	f.StringVar(&owner, "owner", "", "owner id")
	f.IntVar(&limit, "limit", 50, "page size (at most 500)")
	f.StringVar(&cursor, "cursor", "", "continue after a previous page (its next)")
	f.BoolVar(&desc, "desc", false, "newest first")
	required(cmd, "owner")
	return cmd
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
