package libinspect

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/readmodel"
	"github.com/idemwork/idemwork/wire"
)

// Inspector reads a service's keys through db (a session whose schema holds the runner
// library's tables: store.DB.Service).
type Inspector struct {
	db      *store.DB
	clock   idem.Clock
	plugins map[string]Plugin
}

// New returns an inspector over db judging expiry by clock, restoring through plugins (by
// policy name; later ones win).
func New(db *store.DB, clock idem.Clock, plugins []Plugin) *Inspector {
	in := &Inspector{db: db, clock: clock, plugins: map[string]Plugin{}}
	for _, p := range plugins {
		in.plugins[p.Policy] = p
	}
	return in
}

// Restored.Via values: how the shown result was obtained.
const (
	// ViaPolicy: restored by the service's registered policy, as a replay would restore it.
	ViaPolicy = "policy"
	// ViaReference: no policy registered for the envelope's name; the stored reference is shown
	// as stored.
	ViaReference = "reference"
)

// InspectKey is InspectStoredKey for a key a user typed: it must follow the key rule.
func (in *Inspector) InspectKey(ctx context.Context, owner, key string) (model.KeyView, error) {
	if err := idemtype.ValidateKey(key); err != nil {
		return model.KeyView{}, err
	}
	return in.InspectStoredKey(ctx, owner, key)
}

// InspectStoredKey reads one key of a service as the next request with it meets it: the
// envelope, the state and the verdict, and the restored result — through the service's policy
// where a plugin is registered for its name, else the stored reference. A restore that fails is
// reported (RestoreError, state FAILS_CLOSED) beside the stored envelope, never returned as the
// error.
func (in *Inspector) InspectStoredKey(ctx context.Context, owner, key string) (model.KeyView, error) {
	if err := idemtype.ValidateOwner(owner); err != nil {
		return model.KeyView{}, err
	}
	if key == "" {
		return model.KeyView{}, apperr.New(apperr.ValidationFailed, "key: empty")
	}
	row, err := readmodel.GetKey(ctx, in.db, owner, key)
	if err != nil {
		return model.KeyView{}, err
	}
	now := in.clock.Now()
	v := model.KeyView{Key: row.Key, Operation: row.Operation, Status: row.Status, Fingerprint: row.Fingerprint,
		CreatedAt: row.CreatedAt, ExpiresAt: row.ExpiresAt, Envelope: row.Response, Expired: !row.ExpiresAt.After(now)}
	if row.Response != nil {
		in.restore(ctx, owner, row.Response, &v)
	}
	v.State, v.VerdictKind, v.Verdict = verdict(v, now)
	v.Next = next(v, now)
	// A service's key has no rows of idemwork's beside it: its one life is the key row.
	life := model.KeyLife{Current: true, Label: "current life (reserved " + row.CreatedAt.UTC().Format("2006-01-02 15:04:05.000Z") + ")",
		Events: []model.Event{{At: row.CreatedAt, Kind: "key", ID: row.Key, Key: &row.Key, Status: &row.Status, Operation: &row.Operation}}}
	v.Lives = []model.KeyLife{life}
	return v, nil
}

// restore fills v.Restored (or v.RestoreError, v.Legacy) from a SUCCEEDED row's envelope.
func (in *Inspector) restore(ctx context.Context, owner string, envelope []byte, v *model.KeyView) {
	env, err := idemtype.ParseEnvelope(envelope)
	if err != nil {
		v.RestoreError = errorView(err)
		return
	}
	if env.Legacy {
		v.Legacy = true
		v.RestoreError = errorView(apperr.New(apperr.PolicyMismatch, "a legacy raw-json-v1 receipt is never replayed"))
		return
	}
	p, ok := in.plugins[env.Policy]
	if !ok {
		// The reference must still be one the runner would have written: ids and integers only.
		if err := checkReference(env); err != nil {
			v.RestoreError = errorView(err)
			return
		}
		v.Restored = model.RestoredView{Result: env.Result, Via: ViaReference, Policy: env.Policy}
		return
	}
	result, err := p.restoreJSON(ctx, in.db.Q(ctx), owner, envelope)
	if err != nil {
		v.RestoreError = errorView(err)
		return
	}
	v.Restored = model.RestoredView{Result: result, Via: ViaPolicy, Policy: env.Policy}
}

// checkReference fails closed on a stored result no policy could have written: anything but a
// flat object of short ids and non-negative integers (the runner's envelope guard, with the
// result's own names as the whitelist).
func checkReference(env idemtype.Envelope) error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(env.Result, &members); err != nil {
		return apperr.New(apperr.SnapshotIntegrity, "stored envelope: the result is not a JSON object")
	}
	fields := make([]string, 0, len(members))
	for name := range members {
		fields = append(fields, name)
	}
	sort.Strings(fields)
	if _, err := idem.BuildEnvelope(env.Policy, fields, env.Result); err != nil {
		return apperr.New(apperr.SnapshotIntegrity, "stored envelope: %s", apperr.As(err).Message)
	}
	return nil
}

// verdict is the key's state (what the next request with it meets) and what its row says, as
// a kind and a sentence. A result the workbench cannot restore (the service's policy is not
// registered with it) is said to be unchecked, never that a replay returns it.
func verdict(v model.KeyView, now time.Time) (state, kind, sentence string) {
	stamp := v.ExpiresAt.UTC().Format("2006-01-02 15:04:05Z")
	switch {
	case v.Expired:
		was := "a SUCCEEDED row"
		if v.Status == "PROCESSING" {
			was = "an abnormal PROCESSING leftover"
		}
		return model.KeyExpired, model.VerdictExpired, fmt.Sprintf("expired at %s (%s): never replayed again", stamp, was)
	case v.Legacy:
		return model.KeyLegacy, model.VerdictLegacy, "legacy raw-json-v1 receipt: readable only, never replayed"
	case v.Status == "PROCESSING":
		return model.KeyProcessing, model.VerdictProcessing, fmt.Sprintf("abnormal: reserved at %s and committed without its result; nothing is known to have run",
			v.CreatedAt.UTC().Format("2006-01-02 15:04:05Z"))
	case v.RestoreError != nil:
		return model.KeyFailsClosed, model.VerdictFailsClosed, fmt.Sprintf("a replay fails closed: %d %s: %s", v.RestoreError.Status, v.RestoreError.Code, v.RestoreError.Message)
	case v.Restored.Via == ViaPolicy:
		return model.KeySucceeded, model.VerdictExecutedOnce, fmt.Sprintf("executed at %s; a replay returns the first result, restored by the service's policy %s from its rows: %s",
			v.CreatedAt.UTC().Format("2006-01-02 15:04:05Z"), v.Restored.Policy, v.Restored.Result)
	}
	return model.KeySucceeded, model.VerdictUnchecked, fmt.Sprintf("unchecked: the service's policy %s is not registered with this workbench, so whether a replay "+
		"returns the first result or fails closed (a row it references edited since) cannot be told from here; its stored reference is %s "+
		"(a workbench built with the policy as a plugin, cli.Options.Plugins, checks it)", v.Restored.Policy, v.Restored.Result)
}

// next is what the next request with the key meets, in a sentence (SPEC §4.2).
func next(v model.KeyView, now time.Time) string {
	stamp := v.ExpiresAt.UTC().Format("2006-01-02 15:04:05Z")
	switch v.State {
	case model.KeyExpired:
		return "executes anew: the row expired, so the next request with this key deletes it and runs"
	case model.KeyLegacy:
		return "never replayed: a legacy receipt is readable only"
	case model.KeyProcessing:
		return fmt.Sprintf("409 IDEMPOTENCY_IN_PROGRESS until the row expires at %s (in %s): never treated as success, never re-executed",
			stamp, v.ExpiresAt.Sub(now).Round(time.Second))
	case model.KeyFailsClosed:
		return fmt.Sprintf("%d %s: the replay is refused, nothing runs again", v.RestoreError.Status, v.RestoreError.Code)
	}
	if v.Restored.Via == ViaPolicy {
		return "the first result, replayed until " + stamp
	}
	return "the service's policy restores the first result from its rows, or fails closed if they changed (not checked here); until " + stamp
}

func errorView(err error) *model.ErrorView {
	ae := wire.Coded(err)
	return &model.ErrorView{Code: ae.Code, Status: ae.Status(), Message: ae.Message}
}
