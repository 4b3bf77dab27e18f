package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/inspect"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store/readmodel"
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

func (a *API) createRecord(r *http.Request, owner, key string) (model.Response, error) {
	var b CreateBody
	if err := a.decodeBody(r, false, &b); err != nil {
		return model.Response{}, err
	}
	module := r.PathValue("module")
	in := model.NewCreate(owner, module, key, b.Title, b.Summary, b.Payload)
	in.ShareInFlight = shareOf(r)
	res, err := a.k.Create(r.Context(), in)
	if err != nil {
		return model.Response{}, err
	}
	return wire.Created(res), nil
}

func (a *API) patchRecord(r *http.Request, owner, key string) (model.Response, error) {
	var b PatchBody
	if err := a.decodeBody(r, false, &b); err != nil {
		return model.Response{}, err
	}
	in := model.NewPatch(owner, r.PathValue("module"), r.PathValue("id"), key, b.ExpectRevision, b.Title, b.Summary, b.Payload)
	in.ShareInFlight = shareOf(r)
	res, err := a.k.Patch(r.Context(), in)
	if err != nil {
		return model.Response{}, err
	}
	return wire.Written(res), nil
}

func (a *API) runFeature(r *http.Request, owner, key string) (model.Response, error) {
	var b FeatureBody
	if err := a.decodeBody(r, true, &b); err != nil {
		return model.Response{}, err
	}
	in := model.NewFeature(owner, r.PathValue("module"), r.PathValue("id"), r.PathValue("featureId"), key, b.Input)
	in.ShareInFlight = shareOf(r)
	res, err := a.k.RunFeature(r.Context(), in)
	if err != nil {
		return model.Response{}, err
	}
	return wire.Written(res), nil
}

func (a *API) createReview(r *http.Request, owner, key string) (model.Response, error) {
	if m := r.PathValue("module"); m != kernel.ModuleCommitment {
		return model.Response{}, apperr.New(apperr.NotFound, "reviews exist only for %s records (POST /v1/modules/%s/records/{id}/reviews), not %s",
			kernel.ModuleCommitment, kernel.ModuleCommitment, m)
	}
	var b ReviewBody
	if err := a.decodeBody(r, false, &b); err != nil {
		return model.Response{}, err
	}
	res, err := a.k.CreateReview(r.Context(), kernel.ReviewInput{Owner: owner, RecordID: r.PathValue("id"), Key: key,
		Verdict: b.Verdict, Comment: b.Comment, ShareInFlight: shareOf(r)})
	if err != nil {
		return model.Response{}, err
	}
	return wire.Write(http.StatusCreated, res.Outcome, res.Waited, res), nil
}

// RecordBody is the body of GET /v1/modules/{module}/records/{id}: the record, its latest
// revision (never every revision: a record's history grows without bound), the first page of
// its executions and of its audit events, and links to read each list a page at a time.
type RecordBody struct {
	Record model.Record `json:"record"`
	// Revisions holds the latest revision only; Links.Revisions reads them all.
	Revisions  []model.Revision   `json:"revisions"`
	Executions []model.Execution  `json:"executions"`
	Audit      []model.AuditEvent `json:"audit"`
	Links      RecordLinks        `json:"links"`
}

// RecordLinks are where a record's lists continue: Revisions is the first page of every
// revision; Executions and Audit the page after the inline one, null when none follows.
type RecordLinks struct {
	Revisions  string  `json:"revisions"`
	Executions *string `json:"executions"`
	Audit      *string `json:"audit"`
}

// RevisionsBody, ExecutionsBody and AuditBody are the pages of GET …/revisions, /executions and
// /audit (?after= continues, ?limit= sizes a page); Next is the next page's path, null after
// the last.
type RevisionsBody struct {
	Revisions []model.Revision `json:"revisions"`
	Next      *string          `json:"next"`
}

// ExecutionsBody is a page of GET …/executions.
type ExecutionsBody struct {
	Executions []model.Execution `json:"executions"`
	Next       *string           `json:"next"`
}

// AuditBody is a page of GET …/audit.
type AuditBody struct {
	Audit []model.AuditEvent `json:"audit"`
	Next  *string            `json:"next"`
}

// read guards a read route: it takes one of the owner's read slots (http.owner_max_reads, the
// CPUs by default), then one of the owner's shares of the pool (the one writes take,
// idempotency.owner_max_conns), and holds both for its statements and the encoding of its
// answer. So one owner's flood of reads runs a few reads at a time and holds at most its share
// of the pool; the rest waits in this process holding nothing, and past the acquire timeout is
// 503 OVERLOADED with Retry-After.
func (a *API) read(fn endpointFunc) endpointFunc {
	return func(r *http.Request, owner string) (model.Response, error) {
		leave, err := a.reads.enter(r.Context(), owner)
		if err != nil {
			return model.Response{}, err
		}
		defer leave()
		release, err := a.k.Runner().HoldOwner(r.Context(), owner)
		if err != nil {
			return model.Response{}, err
		}
		defer release()
		return fn(r, owner)
	}
}

// recordParams checks the record id of the path and the page's query (limit up to max).
func recordParams(r *http.Request, owner string, max int) (readmodel.RecordPageParams, error) {
	p := readmodel.RecordPageParams{Owner: owner, Module: r.PathValue("module"), RecordID: r.PathValue("id"), Limit: readmodel.DefaultRecordPage}
	if err := kernel.CheckRecordID(p.RecordID); err != nil {
		return p, err
	}
	q := r.URL.Query()
	for name, values := range q {
		if name != "limit" && name != "after" {
			return p, apperr.New(apperr.BadRequest, "unknown query parameter %q (a record's lists take limit and after)", name)
		}
		if len(values) != 1 {
			return p, apperr.New(apperr.BadRequest, "query parameter %s appears %d times", name, len(values))
		}
	}
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > max {
			return p, apperr.New(apperr.BadRequest, "limit: want 1-%d entries per page, got %q", max, v[0])
		}
		p.Limit = n
	}
	return p, nil
}

// pagePath is the path of a list's page after after, at the request's page size.
func pagePath(r *http.Request, part, after string, p readmodel.RecordPageParams) *string {
	v := url.Values{}
	if after != "" {
		v.Set("after", after)
	}
	if _, ok := r.URL.Query()["limit"]; ok {
		v.Set("limit", strconv.Itoa(p.Limit))
	}
	path := "/v1/modules/" + url.PathEscape(p.Module) + "/records/" + url.PathEscape(p.RecordID) + "/" + part
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	return &path
}

func executionCursor(e model.Execution) string {
	return readmodel.Cursor{At: e.CreatedAt, ID: e.ID}.Encode()
}

func auditCursor(e model.AuditEvent) string { return readmodel.Cursor{At: e.At, ID: e.ID}.Encode() }

// getRecord answers the record, its latest revision and the first page of its executions and
// audit events: three statements in one round trip, however long its history.
func (a *API) getRecord(r *http.Request, owner string) (model.Response, error) {
	if r.URL.RawQuery != "" {
		return model.Response{}, apperr.New(apperr.BadRequest, "GET of a record takes no query; page its lists at links.revisions, links.executions and links.audit")
	}
	p, err := recordParams(r, owner, readmodel.MaxRecordPage)
	if err != nil {
		return model.Response{}, err
	}
	pages, err := readmodel.GetRecordFirstPages(r.Context(), a.k.DB(), p)
	if err != nil {
		return model.Response{}, err
	}
	execs, audit := pages.Executions, pages.Audit
	body := RecordBody{Record: pages.Record, Revisions: []model.Revision{pages.Latest}, Executions: execs, Audit: audit,
		Links: RecordLinks{Revisions: *pagePath(r, "revisions", "", p)}}
	if pages.MoreExecutions {
		body.Links.Executions = pagePath(r, "executions", executionCursor(execs[len(execs)-1]), p)
	}
	if pages.MoreAudit {
		body.Links.Audit = pagePath(r, "audit", auditCursor(audit[len(audit)-1]), p)
	}
	return wire.JSON(http.StatusOK, body), nil
}

// getRecordPart answers one page of a record's revisions, executions or audit events: its own
// statement alone (a second only when the page is empty, to tell a record without entries from
// no record).
func (a *API) getRecordPart(r *http.Request, owner string) (model.Response, error) {
	part := r.PathValue("part")
	max := readmodel.MaxRecordPage
	switch part {
	case "revisions":
		max = readmodel.MaxRevisionPage
	case "executions", "audit":
	default:
		return model.Response{}, apperr.New(apperr.NotFound, "no route GET %s (a record has /revisions, /executions and /audit)", r.URL.Path)
	}
	p, err := recordParams(r, owner, max)
	if err != nil {
		return model.Response{}, err
	}
	after := r.URL.Query().Get("after")
	db, ctx := a.k.DB(), r.Context()
	switch part {
	case "revisions":
		if after != "" {
			n, err := strconv.Atoi(after)
			if err != nil || n < 0 {
				return model.Response{}, apperr.New(apperr.BadRequest, "after: want a revision number (0 or more), got %q", after)
			}
			p.AfterRevision = n
		}
		revs, more, err := readmodel.RecordRevisionPage(ctx, db, p)
		if err != nil {
			return model.Response{}, err
		}
		body := RevisionsBody{Revisions: revs}
		if more {
			body.Next = pagePath(r, part, strconv.Itoa(revs[len(revs)-1].Revision), p)
		}
		return wire.JSON(http.StatusOK, body), nil
	}
	if after != "" {
		c, err := readmodel.DecodeCursor(after)
		if err != nil {
			return model.Response{}, apperr.New(apperr.BadRequest, "after: %q is not a cursor this server printed (follow next)", after)
		}
		p.After = c
	}
	if part == "executions" {
		execs, more, err := readmodel.RecordExecutionPage(ctx, db, p)
		if err != nil {
			return model.Response{}, err
		}
		body := ExecutionsBody{Executions: execs}
		if more {
			body.Next = pagePath(r, part, executionCursor(execs[len(execs)-1]), p)
		}
		return wire.JSON(http.StatusOK, body), nil
	}
	audit, more, err := readmodel.RecordAuditPage(ctx, db, p)
	if err != nil {
		return model.Response{}, err
	}
	body := AuditBody{Audit: audit}
	if more {
		body.Next = pagePath(r, part, auditCursor(audit[len(audit)-1]), p)
	}
	return wire.JSON(http.StatusOK, body), nil
}

func (a *API) getKey(r *http.Request, owner string) (model.Response, error) {
	v, err := inspect.Key(r.Context(), a.k, owner, r.PathValue("key"))
	if err != nil {
		return model.Response{}, err
	}
	return wire.JSON(http.StatusOK, v), nil
}
