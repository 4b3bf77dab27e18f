package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/wire"
)

// The flags of one write request, bound once per kind and shared by the command itself
// (create, patch, action) and its storm (storm create, …), so the two can never drift apart.
// The request is built by model's builders, the ones the workbench and HTTP use: the same
// fields through any door are one body and one fingerprint (a create's --summary "" and
// --payload '{}' are its defaults, the same request given or not).

type createFlags struct {
	in      model.CreateInput
	summary string
	payload jsonFlag
}

func bindCreate(cmd *cobra.Command, keyHelp string) *createFlags {
	r := &createFlags{}
	f := cmd.Flags()
	f.StringVar(&r.in.Owner, "owner", "", "owner id")
	f.StringVar(&r.in.Module, "module", "", "module code: NOTE, MEM-001, COMMITMENT")
	f.Var((*keyFlag)(&r.in.Key), "key", keyHelp)
	f.StringVar(&r.in.Title, "title", "", "title (1-200 characters)")
	f.StringVar(&r.summary, "summary", "", "summary (at most 2000 characters; \"\" is the same request as none)")
	f.Var(&r.payload, "payload", "payload, a JSON object (default {}; --payload '{}' is the same request as none)")
	required(cmd, "owner", "module", "title")
	return r
}

func (r *createFlags) input(cmd *cobra.Command) model.CreateInput {
	return model.NewCreate(r.in.Owner, r.in.Module, r.in.Key, r.in.Title, optString(cmd, "summary", r.summary), r.payload.value())
}

type patchFlags struct {
	in             model.PatchInput
	title, summary string
	payload        jsonFlag
}

func bindPatch(cmd *cobra.Command, keyHelp string) *patchFlags {
	r := &patchFlags{}
	f := cmd.Flags()
	f.StringVar(&r.in.Owner, "owner", "", "owner id")
	f.StringVar(&r.in.Module, "module", "", "module code")
	f.StringVar(&r.in.RecordID, "record", "", "record id")
	f.IntVar(&r.in.ExpectRevision, "expect-revision", 0, "the revision the record must still be at")
	f.Var((*keyFlag)(&r.in.Key), "key", keyHelp)
	f.StringVar(&r.title, "title", "", "new title")
	f.StringVar(&r.summary, "summary", "", "new summary")
	f.Var(&r.payload, "payload", "new payload (a JSON object)")
	required(cmd, "owner", "module", "record", "expect-revision")
	return r
}

func (r *patchFlags) input(cmd *cobra.Command) model.PatchInput {
	in := r.in
	return model.NewPatch(in.Owner, in.Module, in.RecordID, in.Key, in.ExpectRevision, optString(cmd, "title", r.title),
		optString(cmd, "summary", r.summary), r.payload.value())
}

type actionFlags struct {
	in    model.FeatureInput
	input jsonFlag
}

func bindAction(cmd *cobra.Command, keyHelp string) *actionFlags {
	r := &actionFlags{}
	f := cmd.Flags()
	f.StringVar(&r.in.Owner, "owner", "", "owner id")
	f.StringVar(&r.in.Module, "module", "", "module code")
	f.StringVar(&r.in.RecordID, "record", "", "record id")
	f.StringVar(&r.in.FeatureID, "feature", "", "feature id, e.g. F01")
	f.Var((*keyFlag)(&r.in.Key), "key", keyHelp)
	f.Var(&r.input, "input", "feature input (a JSON object, default {}; --input '{}' is the same request as none)")
	required(cmd, "owner", "module", "record", "feature")
	return r
}

func (r *actionFlags) request(cmd *cobra.Command) model.FeatureInput {
	in := r.in
	return model.NewFeature(in.Owner, in.Module, in.RecordID, in.FeatureID, in.Key, r.input.value())
}

// runWrite runs one write command: the kernel (refused on a read-only session), the write, the
// result printed as text or as the JSON of SPEC §10.2 — the body of answer's response, the one
// the HTTP API sends for the same write (wire.Created for a create, wire.Written otherwise).
func (a *app) runWrite(cmd *cobra.Command, answer func(model.WriteResult) model.Response,
	write func(ctx context.Context, k *kernel.Kernel) (model.WriteResult, error)) error {
	k, err := a.writer(cmd.Context())
	if err != nil {
		return err
	}
	res, err := write(cmd.Context(), k)
	if err != nil {
		return wire.LostCommit(err, flagValue(cmd, "key"), lookAfter(cmd))
	}
	a.printWrite(res, answer)
	return nil
}

// flagValue is a flag's value as given ("" when absent).
func flagValue(cmd *cobra.Command, name string) string {
	if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
		return f.Value.String()
	}
	return ""
}

// lookAfter says how to see whether a write sent without a key committed.
func lookAfter(cmd *cobra.Command) string {
	owner, record := flagValue(cmd, "owner"), flagValue(cmd, "record")
	if record == "" {
		return fmt.Sprintf("look for a record created just now in the owner's history (idemwork history --owner %s)", owner)
	}
	module := flagValue(cmd, "module")
	if module == "" {
		module = kernel.ModuleCommitment // review names no module: reviews are COMMITMENT's
	}
	return fmt.Sprintf("look at the record's revisions, executions and audit (idemwork record --owner %s --module %s --record %s)",
		owner, module, record)
}

// keyFlag is an --key flag: given, it must not be empty. An explicit --key "" would otherwise
// run the write unkeyed, which is not what a script that passed a key meant.
type keyFlag string

func (k *keyFlag) String() string { return string(*k) }
func (k *keyFlag) Type() string   { return "KEY" }
func (k *keyFlag) Set(s string) error {
	if s == "" {
		return errors.New("an empty key; pass a key (1-255 visible ASCII characters) or leave --key out for an unkeyed write")
	}
	*k = keyFlag(s)
	return nil
}
