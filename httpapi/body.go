package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

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

// bodyOptions decode a request body into its struct by the struct's tags. json v2's defaults
// already refuse a duplicate name, invalid UTF-8 and a lone surrogate escape; on top, a name the
// struct does not know is refused, and a string or integer member must be one (json v2 would
// leave the field as it was for null, and take any int).
var bodyOptions = jsonv2.JoinOptions(
	jsonv2.RejectUnknownMembers(true),
	jsonv2.WithUnmarshalers(jsonv2.JoinUnmarshalers(jsonv2.UnmarshalFromFunc(readString), jsonv2.UnmarshalFromFunc(readInt))))

// memberError is a member's value the struct cannot take; json v2 adds where it is.
type memberError struct {
	nul  bool // a NUL character: 422, as the boundary refuses it anywhere
	want string
}

func (e *memberError) Error() string {
	if e.nul {
		return "holds a NUL character (\\u0000), which PostgreSQL jsonb cannot store"
	}
	return "must be " + e.want
}

// readString reads a string member (a *string member's null is json v2's: nil).
func readString(dec *jsontext.Decoder, s *string) error {
	if dec.PeekKind() != '"' {
		if err := dec.SkipValue(); err != nil {
			return err
		}
		return &memberError{want: "a string"}
	}
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	if bytes.IndexByte(v, '\\') < 0 {
		*s = string(v[1 : len(v)-1])
		return nil
	}
	u, err := jsontext.AppendUnquote(nil, v)
	if err != nil {
		return err
	}
	if bytes.IndexByte(u, 0) >= 0 {
		return &memberError{nul: true}
	}
	*s = string(u)
	return nil
}

// readInt reads an integer member of PostgreSQL's integer range.
func readInt(dec *jsontext.Decoder, n *int) error {
	if dec.PeekKind() != '0' {
		if err := dec.SkipValue(); err != nil {
			return err
		}
		return &memberError{want: "an integer"}
	}
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	i, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || i > math.MaxInt32 || i < math.MinInt32 {
		return &memberError{want: fmt.Sprintf("an integer between %d and %d", math.MinInt32, math.MaxInt32)}
	}
	*n = int(i)
	return nil
}

// decodeBody reads the body, one JSON object, into dst by its struct tags. An empty body is
// accepted only when optional. Malformed JSON, a name dst does not know (an "owner" in a body
// never silently does anything), a mistyped member and anything after the object are 400
// BAD_REQUEST; a duplicate name, invalid UTF-8 or a NUL in a string member is 422
// VALIDATION_FAILED naming the member, never resolved "last wins" or replaced.
func (a *API) decodeBody(r *http.Request, optional bool, dst any) error {
	body, err := a.readBody(r)
	if err != nil {
		return err
	}
	if len(body) == 0 && optional {
		return nil
	}
	switch c := firstByte(body); {
	case c == 0:
		return apperr.New(apperr.BadRequest, "malformed JSON: not valid JSON: unexpected end of input")
	case c != '{' && strings.IndexByte(`"[-0123456789ntf`, c) >= 0:
		return apperr.New(apperr.BadRequest, "the request body must be a JSON object")
	}
	return bodyError(body, jsonv2.Unmarshal(body, dst, bodyOptions))
}

// firstByte is the first byte of body after JSON whitespace, 0 when there is none.
func firstByte(body []byte) byte {
	for _, c := range body {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c
	}
	return 0
}

// bodyError maps json v2's refusals to the codes of SPEC §9, in the JSON boundary's words.
func bodyError(body []byte, err error) error {
	if err == nil {
		return nil
	}
	if je := jsonb.Explain(body, err); je != nil {
		field := jsonb.Path("", je.Pointer)
		switch {
		case je.Kind == jsonb.DuplicateName || je.Kind == jsonb.InvalidUTF8:
			return apperr.New(apperr.ValidationFailed, "%s: %s", field, je.Detail)
		case field != "":
			return apperr.New(apperr.BadRequest, "malformed JSON in field %q: %s", field, je.Detail)
		}
		return apperr.New(apperr.BadRequest, "malformed JSON: %s", je.Detail)
	}
	var se *jsonv2.SemanticError
	if !errors.As(err, &se) {
		return apperr.Wrap(apperr.BadRequest, err, "the request body could not be decoded")
	}
	field := jsonb.Path("", string(se.JSONPointer))
	var me *memberError
	switch {
	case errors.Is(se.Err, jsonv2.ErrUnknownName):
		name := se.JSONPointer.LastToken()
		if strings.IndexByte(name, 0) >= 0 {
			return apperr.New(apperr.ValidationFailed, "%s: a name holds a NUL character (\\u0000), which PostgreSQL jsonb cannot store", field)
		}
		return apperr.New(apperr.BadRequest, "unknown field %q (the owner comes from the bearer token, never from the body)", name)
	case errors.As(se.Err, &me) && me.nul:
		return apperr.New(apperr.ValidationFailed, "%s: %s", field, me.Error())
	case errors.As(se.Err, &me):
		return apperr.New(apperr.BadRequest, "field %q %s", field, me.Error())
	}
	return apperr.Wrap(apperr.BadRequest, err, "the request body could not be decoded")
}

func tooLarge(limit int64) error {
	return apperr.New(apperr.PayloadTooLarge, "the request body exceeds http.max_body_bytes (%d bytes)", limit)
}
