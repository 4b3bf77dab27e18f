package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/wire"
)

// Request bodies. Unknown fields are rejected (400), so an "owner" in a body never silently
// does anything: the owner is the token's.

// CreateBody is the body of POST /v1/modules/{module}/records.
type CreateBody struct {
	Title   string          `json:"title"`
	Summary *string         `json:"summary,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// PatchBody is the body of PATCH /v1/modules/{module}/records/{id}.
type PatchBody struct {
	ExpectRevision int             `json:"expectRevision"`
	Title          *string         `json:"title,omitempty"`
	Summary        *string         `json:"summary,omitempty"`
	Payload        json.RawMessage `json:"payload,omitempty"`
}

// FeatureBody is the (optional) body of POST .../features/{featureId}.
type FeatureBody struct {
	Input json.RawMessage `json:"input,omitempty"`
}

// ReviewBody is the body of POST /v1/modules/COMMITMENT/records/{id}/reviews.
type ReviewBody struct {
	Verdict string `json:"verdict"`
	Comment string `json:"comment"`
}

// shareOf reads the per-request sharing switch: nil (the runner's default) unless the client
// sent X-Idemwork-Share: off.
func shareOf(r *http.Request) *bool {
	switch strings.ToLower(strings.TrimSpace(r.Header.Get(HeaderShare))) {
	case "off", "false", "0", "no":
		f := false
		return &f
	}
	return nil
}

func (a *API) createRecord(r *http.Request, owner, key string) (wire.Response, error) {
	var b CreateBody
	if err := a.decodeObject(r, false, b.read); err != nil {
		return wire.Response{}, err
	}
	module := r.PathValue("module")
	in := model.NewCreate(owner, module, key, b.Title, b.Summary, b.Payload)
	in.ShareInFlight = shareOf(r)
	res, err := a.k.Create(r.Context(), in)
	if err != nil {
		return wire.Response{}, err
	}
	return kernel.WriteResponse(res), nil
}

func (a *API) patchRecord(r *http.Request, owner, key string) (wire.Response, error) {
	var b PatchBody
	if err := a.decodeObject(r, false, b.read); err != nil {
		return wire.Response{}, err
	}
	in := model.NewPatch(owner, r.PathValue("module"), r.PathValue("id"), key, b.ExpectRevision, b.Title, b.Summary, b.Payload)
	in.ShareInFlight = shareOf(r)
	res, err := a.k.Patch(r.Context(), in)
	if err != nil {
		return wire.Response{}, err
	}
	return kernel.WriteResponse(res), nil
}

func (a *API) runFeature(r *http.Request, owner, key string) (wire.Response, error) {
	var b FeatureBody
	if err := a.decodeObject(r, true, b.read); err != nil {
		return wire.Response{}, err
	}
	in := model.NewFeature(owner, r.PathValue("module"), r.PathValue("id"), r.PathValue("featureId"), key, b.Input)
	in.ShareInFlight = shareOf(r)
	res, err := a.k.RunFeature(r.Context(), in)
	if err != nil {
		return wire.Response{}, err
	}
	return kernel.WriteResponse(res), nil
}

func (a *API) createReview(r *http.Request, owner, key string) (wire.Response, error) {
	if m := r.PathValue("module"); m != kernel.ModuleCommitment {
		return wire.Response{}, apperr.New(apperr.NotFound, "reviews exist only for %s records (POST /v1/modules/%s/records/{id}/reviews), not %s",
			kernel.ModuleCommitment, kernel.ModuleCommitment, m)
	}
	var b ReviewBody
	if err := a.decodeObject(r, false, b.read); err != nil {
		return wire.Response{}, err
	}
	res, err := a.k.CreateReview(r.Context(), kernel.ReviewInput{Owner: owner, RecordID: r.PathValue("id"), Key: key,
		Verdict: b.Verdict, Comment: b.Comment, ShareInFlight: shareOf(r)})
	if err != nil {
		return wire.Response{}, err
	}
	return res.Response(), nil
}

func (a *API) recordDetail(r *http.Request, owner string) (store.RecordDetail, error) {
	id := r.PathValue("id")
	if err := kernel.CheckRecordID(id); err != nil {
		return store.RecordDetail{}, err
	}
	return a.k.DB().GetRecordDetail(r.Context(), owner, r.PathValue("module"), id)
}

func (a *API) getRecord(r *http.Request, owner string) (wire.Response, error) {
	d, err := a.recordDetail(r, owner)
	if err != nil {
		return wire.Response{}, err
	}
	return wire.JSON(http.StatusOK, d), nil
}

func (a *API) getRecordPart(r *http.Request, owner string) (wire.Response, error) {
	part := r.PathValue("part")
	switch part {
	case "revisions", "executions", "audit":
	default:
		return wire.Response{}, apperr.New(apperr.NotFound, "no route GET %s (a record has /revisions, /executions and /audit)", r.URL.Path)
	}
	d, err := a.recordDetail(r, owner)
	if err != nil {
		return wire.Response{}, err
	}
	var body any
	switch part {
	case "revisions":
		body = map[string]any{"revisions": nonNil(d.Revisions)}
	case "executions":
		body = map[string]any{"executions": nonNil(d.Executions)}
	default:
		body = map[string]any{"audit": nonNil(d.Audit)}
	}
	return wire.JSON(http.StatusOK, body), nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (a *API) getKey(r *http.Request, owner string) (wire.Response, error) {
	v, err := a.k.InspectKey(r.Context(), owner, r.PathValue("key"))
	if err != nil {
		return wire.Response{}, err
	}
	return wire.JSON(http.StatusOK, v), nil
}
