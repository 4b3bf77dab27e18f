package jsonb

import (
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// Decode returns the one JSON value in raw as encoding/json's Decoder with UseNumber decodes it
// into an interface value — nil, bool, string, json.Number, []any, map[string]any — with the
// pooled decoder of Canonical and its refusals: a duplicate name, invalid UTF-8 or anything after
// the value is an error (where encoding/json would keep the last member, replace the bytes, or
// stop reading). Where Decode succeeds, encoding/json decodes the same value.
func Decode(raw []byte) (any, error) {
	s := newState(raw, Limits{})
	defer s.release()
	v, err := s.decode()
	if err != nil {
		return nil, s.fail(err, "not valid JSON")
	}
	if err := s.end(); err != nil {
		return nil, err
	}
	return v, nil
}

var errNotAName = errors.New("an object member has no name")

func (s *state) decode() (any, error) {
	tok, err := s.dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case 'n':
		return nil, nil
	case 't':
		return true, nil
	case 'f':
		return false, nil
	case '"':
		return tok.String(), nil
	case '0':
		return json.Number(tok.String()), nil
	case '[':
		arr := []any{} // encoding/json's empty array is empty, not nil (which encodes as null)
		for s.dec.PeekKind() != ']' {
			v, err := s.decode()
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := s.dec.ReadToken()
		return arr, err
	case '{':
		obj := map[string]any{}
		for s.dec.PeekKind() != '}' {
			tok, err := s.dec.ReadToken()
			if err != nil {
				return nil, err
			}
			if tok.Kind() != '"' {
				return nil, errNotAName
			}
			name := tok.String() // before the value is read: the token is only valid until then
			v, err := s.decode()
			if err != nil {
				return nil, err
			}
			obj[name] = v
		}
		_, err := s.dec.ReadToken()
		return obj, err
	}
	return nil, errNotAName // unreachable: ReadToken never returns a closing token here
}

// AppendValue appends a JSON text of v (valid JSON, not canonical: pass it through Canonical) for
// the values Decode returns and a feature builds — nil, bool, string, json.Number, int, int64,
// []any, map[string]any — and reports true; for anything else (or a string that is not valid
// UTF-8, a number that is not a JSON number, which encoding/json writes differently or refuses)
// it reports false, and the caller encodes v with encoding/json. Where it reports true, the text
// is the same JSON value as json.Marshal's.
func AppendValue(dst []byte, v any) ([]byte, bool) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), true
	case bool:
		return strconv.AppendBool(dst, v), true
	case string:
		if !utf8.ValidString(v) {
			return dst, false
		}
		return AppendString(dst, v), true
	case json.Number:
		if !isJSONNumber(string(v)) {
			return dst, false
		}
		return append(dst, v...), true
	case int:
		return strconv.AppendInt(dst, int64(v), 10), true
	case int64:
		return strconv.AppendInt(dst, v, 10), true
	case []any:
		if v == nil {
			return append(dst, "null"...), true
		}
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			var ok bool
			if dst, ok = AppendValue(dst, e); !ok {
				return dst, false
			}
		}
		return append(dst, ']'), true
	case map[string]any:
		if v == nil {
			return append(dst, "null"...), true
		}
		dst = append(dst, '{')
		first := true
		for name, e := range v {
			if !utf8.ValidString(name) {
				return dst, false
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(AppendString(dst, name), ':')
			var ok bool
			if dst, ok = AppendValue(dst, e); !ok {
				return dst, false
			}
		}
		return append(dst, '}'), true
	}
	return dst, false
}

// isJSONNumber reports whether s is a JSON number literal (RFC 8259 §6), the check encoding/json
// makes of a json.Number before it writes one.
func isJSONNumber(s string) bool {
	if s == "" {
		return false // encoding/json writes an empty json.Number as 0
	}
	if s[0] == '-' {
		s = s[1:]
		if s == "" {
			return false
		}
	}
	switch {
	case s[0] == '0':
		s = s[1:]
	case '1' <= s[0] && s[0] <= '9':
		for s = s[1:]; s != "" && '0' <= s[0] && s[0] <= '9'; s = s[1:] {
		}
	default:
		return false
	}
	if len(s) >= 2 && s[0] == '.' && '0' <= s[1] && s[1] <= '9' {
		for s = s[2:]; s != "" && '0' <= s[0] && s[0] <= '9'; s = s[1:] {
		}
	}
	if len(s) >= 2 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if s[0] == '+' || s[0] == '-' {
			s = s[1:]
			if s == "" {
				return false
			}
		}
		for ; s != "" && '0' <= s[0] && s[0] <= '9'; s = s[1:] {
		}
	}
	return s == ""
}
