package idemhttp

import (
	"net/http"
	"strings"

	"github.com/dunglas/httpsfv"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
)

// ParseKey reads the Idempotency-Key header of draft-ietf-httpapi-idempotency-key-header:
// an RFC 8941 sf-string ("8e03978e-…", with its escapes \" and \\) or the key bare
// (8e03978e-…); both name the same key, and the quoted form's RFC 8941 parameters
// ("…";name=value) are ignored. present is false when the header is absent. An empty,
// whitespace-only, repeated or unparsable header is 400 BAD_REQUEST: a key the client meant to
// send is never dropped into an unkeyed write. The key itself is checked by the runner (1-255
// visible ASCII characters, else 422 VALIDATION_FAILED). idemwork serve reads its header with it
// too: one parser for both.
func ParseKey(h http.Header) (key string, present bool, err error) {
	values, present := h[http.CanonicalHeaderKey(idemtype.HeaderIdempotencyKey)]
	if !present {
		return "", false, nil
	}
	if len(values) != 1 {
		return "", true, apperr.New(apperr.BadRequest, "%s appears %d times; send it exactly once", idemtype.HeaderIdempotencyKey, len(values))
	}
	v := strings.Trim(values[0], " \t") // optional whitespace around a field value (RFC 9110)
	if v == "" {
		return "", true, apperr.New(apperr.BadRequest, "%s is empty; send a key (e.g. a UUID) or leave the header out", idemtype.HeaderIdempotencyKey)
	}
	if v[0] != '"' {
		for i := 0; i < len(v); i++ {
			if c := v[i]; c < 0x21 || c > 0x7e {
				return "", true, apperr.New(apperr.BadRequest, "%s: byte %d (0x%02x) is not a visible ASCII character; quote the key as an sf-string (\"...\") or send it bare without spaces", idemtype.HeaderIdempotencyKey, i, c)
			}
		}
		return v, true, nil
	}
	key, params, err := parseSFString(v)
	if err != nil {
		return "", true, apperr.New(apperr.BadRequest, "%s is not an RFC 8941 string: %s", idemtype.HeaderIdempotencyKey, err.Error())
	}
	if params != "" {
		// The header is an RFC 8941 Item, and an Item may carry parameters (;name=value): the
		// draft defines none, and RFC 8941 §3.1.2 asks fields not to refuse the ones they do
		// not know, so they are ignored — once they parse as parameters.
		item, err := httpsfv.UnmarshalItem([]string{v})
		if s, ok := item.Value.(string); err != nil || !ok || s != key {
			return "", true, apperr.New(apperr.BadRequest, "%s: %s after the closing quote is not RFC 8941 parameters (;name=value); send the quoted key alone",
				idemtype.HeaderIdempotencyKey, quoteShort(params))
		}
	}
	if key == "" {
		return "", true, apperr.New(apperr.BadRequest, "%s is an empty string; send a key (e.g. a UUID) or leave the header out", idemtype.HeaderIdempotencyKey)
	}
	return key, true, nil
}

type sfError string

func (e sfError) Error() string { return string(e) }

// parseSFString parses the RFC 8941 §4.2.5 sf-string that starts the value: DQUOTE, then
// printable ASCII (0x20-0x7E) with \" and \\ as the only escapes, DQUOTE. params is what
// follows the closing quote (an Item's parameters, or garbage).
func parseSFString(v string) (key, params string, err error) {
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i == len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", "", sfError("a backslash must escape \" or \\")
			}
			b.WriteByte(v[i])
		case c == '"':
			return b.String(), v[i+1:], nil
		case c < 0x20 || c > 0x7e:
			return "", "", sfError("only printable ASCII may appear between the quotes")
		default:
			b.WriteByte(c)
		}
	}
	return "", "", sfError("the closing quote is missing")
}

func quoteShort(s string) string {
	if len(s) > 16 {
		s = s[:16] + "…"
	}
	return "\"" + s + "\""
}
