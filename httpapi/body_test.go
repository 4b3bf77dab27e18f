package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
)

// A body is decoded by its struct's tags with the refusals of SPEC §10.3: each refusal's code and
// words, without a server (the contract tests send the same bodies over HTTP).
func TestBodiesAreDecodedByTheirTagsWithTheBoundarysRefusals(t *testing.T) {
	t.Parallel()
	a := &API{opts: Options{MaxBodyBytes: 100}}
	for _, c := range []struct{ body, code, msg string }{
		{``, "BAD_REQUEST", "malformed JSON: not valid JSON: unexpected end of input"},
		{`  `, "BAD_REQUEST", "malformed JSON: not valid JSON: unexpected end of input"},
		{`{"title":`, "BAD_REQUEST", "malformed JSON: unexpected end of JSON"},
		{`null`, "BAD_REQUEST", "the request body must be a JSON object"},
		{`["title"]`, "BAD_REQUEST", "the request body must be a JSON object"},
		{`x`, "BAD_REQUEST", "malformed JSON: not valid JSON at byte 0: invalid character 'x' at start of value"},
		{`{"title":"t"} {}`, "BAD_REQUEST", "malformed JSON: not valid JSON at byte 14: invalid character '{' after top-level value"},
		{`{"title":tru}`, "BAD_REQUEST", `malformed JSON in field "title": not valid JSON at byte 12: invalid character '}' in literal true`},
		{`{"title":"t","owner":"x"}`, "BAD_REQUEST", `unknown field "owner" (the owner comes from the bearer token, never from the body)`},
		{`{"Title":"t"}`, "BAD_REQUEST", `unknown field "Title"`},
		{"{\"ti\\u0000tle\":1}", "VALIDATION_FAILED", `ti` + "\x00" + `tle: a name holds a NUL character`},
		{`{"title":null}`, "BAD_REQUEST", `field "title" must be a string`},
		{`{"title":[1,"x"]}`, "BAD_REQUEST", `field "title" must be a string`},
		{"{\"title\":[1,\"\xff\"]}", "VALIDATION_FAILED", "title[1]: not valid UTF-8"},
		{`{"title":"\u0000"}`, "VALIDATION_FAILED", `title: holds a NUL character (\u0000), which PostgreSQL jsonb cannot store`},
		{`{"title":"a","title":"b"}`, "VALIDATION_FAILED", `title: the name appears twice in one object`},
		{`{"payload":{"a":1,"a":2}}`, "VALIDATION_FAILED", `payload.a: the name appears twice in one object`},
		{`{"title":"\ud800"}`, "VALIDATION_FAILED", `title: a lone UTF-16 surrogate escape`},
		{`{"title":"` + string(bytes.Repeat([]byte("x"), 100)) + `"}`, "PAYLOAD_TOO_LARGE", "the request body exceeds http.max_body_bytes (100 bytes)"},
	} {
		var b CreateBody
		err := a.decodeBody(httptest.NewRequest(http.MethodPost, "/", bytes.NewReader([]byte(c.body))), false, &b)
		require.Error(t, err, c.body)
		require.Equal(t, c.code, string(apperr.CodeOf(err)), "%q: %v", c.body, err)
		require.Contains(t, err.Error(), c.msg, c.body)
	}
	for _, c := range []struct{ body, code, msg string }{
		{`{"expectRevision":"1"}`, "BAD_REQUEST", `field "expectRevision" must be an integer`},
		{`{"expectRevision":null}`, "BAD_REQUEST", `field "expectRevision" must be an integer`},
		{`{"expectRevision":1.5}`, "BAD_REQUEST", `field "expectRevision" must be an integer between -2147483648 and 2147483647`},
		{`{"expectRevision":2147483648}`, "BAD_REQUEST", `field "expectRevision" must be an integer between -2147483648 and 2147483647`},
	} {
		var b PatchBody
		err := a.decodeBody(httptest.NewRequest(http.MethodPatch, "/", bytes.NewReader([]byte(c.body))), false, &b)
		require.Error(t, err, c.body)
		require.Equal(t, c.code, string(apperr.CodeOf(err)), "%q: %v", c.body, err)
		require.Contains(t, err.Error(), c.msg, c.body)
	}

	var p PatchBody
	require.NoError(t, a.decodeBody(httptest.NewRequest(http.MethodPatch, "/", bytes.NewReader([]byte(
		`{"expectRevision":-2147483648,"title":"a\"\u00e9","summary":null,"payload":{"b":1, "a":[]}}`))), false, &p))
	require.Equal(t, -2147483648, p.ExpectRevision)
	require.Equal(t, "a\"é", *p.Title)
	require.Nil(t, p.Summary)
	require.Equal(t, `{"b":1, "a":[]}`, string(p.Payload), "the payload as written: the kernel canonicalises it")
	var f FeatureBody
	require.NoError(t, a.decodeBody(httptest.NewRequest(http.MethodPost, "/", http.NoBody), true, &f))
	require.Nil(t, f.Input)
}
