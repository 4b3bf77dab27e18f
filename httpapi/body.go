package httpapi

import (
	"errors"
	"io"
	"net/http"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/jsonb"
)

// readBody reads a capped request body: 413 PAYLOAD_TOO_LARGE above the cap.
func (a *API) readBody(r *http.Request) ([]byte, error) {
	limit := a.opts.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(limit)
		}
		return nil, apperr.Wrap(apperr.BadRequest, err, "the request body could not be read")
	}
	return body, nil
}

// decodeObject reads the body, one JSON object, through the JSON boundary's decoder member by
// member: member reads each known name's value with the reader and reports false for a name the
// route does not know (400 BAD_REQUEST: an "owner" in a body never silently does anything). An
// empty body is accepted only when optional. Malformed JSON, a mistyped member and anything after
// the object are 400 BAD_REQUEST; a duplicate name, invalid UTF-8 or a NUL anywhere in the body is
// 422 VALIDATION_FAILED naming the member, never resolved "last wins" or replaced.
func (a *API) decodeObject(r *http.Request, optional bool, member func(rd *jsonb.Reader, name []byte) (bool, error)) error {
	body, err := a.readBody(r)
	if err != nil {
		return err
	}
	if len(body) == 0 && optional {
		return nil
	}
	rd := jsonb.NewReader(body)
	defer rd.Close()
	err = rd.Object(func(name []byte) error {
		known, err := member(rd, name)
		if err == nil && !known {
			return apperr.New(apperr.BadRequest, "unknown field %q (the owner comes from the bearer token, never from the body)", name)
		}
		return err
	})
	return bodyError(err)
}

// bodyError maps the boundary's refusals to the codes of SPEC §9.
func bodyError(err error) error {
	var je *jsonb.Error
	if !errors.As(err, &je) {
		return err
	}
	field := jsonb.Path("", je.Pointer)
	switch je.Kind {
	case jsonb.DuplicateName, jsonb.InvalidUTF8, jsonb.NUL:
		return apperr.New(apperr.ValidationFailed, "%s: %s", field, je.Detail)
	case jsonb.WrongType:
		if field == "" {
			return apperr.New(apperr.BadRequest, "the request body %s", je.Detail)
		}
		return apperr.New(apperr.BadRequest, "field %q %s", field, je.Detail)
	}
	if field != "" {
		return apperr.New(apperr.BadRequest, "malformed JSON in field %q: %s", field, je.Detail)
	}
	return apperr.New(apperr.BadRequest, "malformed JSON: %s", je.Detail)
}

// optString reads a string member that may be null (absent).
func optString(rd *jsonb.Reader) (*string, error) {
	if null, err := rd.Null(); null || err != nil {
		return nil, err
	}
	s, err := rd.String()
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// rawValue reads a JSON member as it was written (checked for duplicate names and UTF-8; the
// kernel canonicalises it).
func rawValue(rd *jsonb.Reader) ([]byte, error) { return rd.Raw() }

func (b *CreateBody) read(rd *jsonb.Reader, name []byte) (bool, error) {
	var err error
	switch string(name) {
	case "title":
		b.Title, err = rd.String()
	case "summary":
		b.Summary, err = optString(rd)
	case "payload":
		b.Payload, err = rawValue(rd)
	default:
		return false, nil
	}
	return true, err
}

func (b *PatchBody) read(rd *jsonb.Reader, name []byte) (bool, error) {
	var err error
	switch string(name) {
	case "expectRevision":
		b.ExpectRevision, err = rd.Int()
	case "title":
		b.Title, err = optString(rd)
	case "summary":
		b.Summary, err = optString(rd)
	case "payload":
		b.Payload, err = rawValue(rd)
	default:
		return false, nil
	}
	return true, err
}

func (b *FeatureBody) read(rd *jsonb.Reader, name []byte) (bool, error) {
	if string(name) != "input" {
		return false, nil
	}
	var err error
	b.Input, err = rawValue(rd)
	return true, err
}

func (b *ReviewBody) read(rd *jsonb.Reader, name []byte) (bool, error) {
	var err error
	switch string(name) {
	case "verdict":
		b.Verdict, err = rd.String()
	case "comment":
		b.Comment, err = rd.String()
	default:
		return false, nil
	}
	return true, err
}

func tooLarge(limit int64) error {
	return apperr.New(apperr.PayloadTooLarge, "the request body exceeds http.max_body_bytes (%d bytes)", limit)
}
