package kernel

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// createBody is bodyJSON(map{"title", "summary", "payload"}) without the map and the reflection:
// for plain values (see marshalPlain) it writes the bytes json.Marshal writes; anything else
// goes through bodyJSON. FuzzCreateBody holds the two together.
func createBody(title string, summary *string, payload json.RawMessage) ([]byte, error) {
	if marshalPlain(title) && (summary == nil || marshalPlain(*summary)) && (payload == nil || rawPlain(payload)) {
		var buf bytes.Buffer
		n := len(`{"payload":,"summary":"","title":""}`) + len(title) + len(payload)
		if summary != nil {
			n += len(*summary)
		}
		buf.Grow(n)
		buf.WriteByte('{')
		ok := true
		if payload != nil {
			buf.WriteString(`"payload":`)
			ok = json.Compact(&buf, payload) == nil
			buf.WriteByte(',')
		}
		if ok {
			if summary != nil {
				buf.WriteString(`"summary":"`)
				buf.WriteString(*summary)
				buf.WriteString(`",`)
			}
			buf.WriteString(`"title":"`)
			buf.WriteString(title)
			buf.WriteString(`"}`)
			return buf.Bytes(), nil
		}
	}
	return bodyJSON(map[string]any{"title": title, "summary": summary, "payload": payload})
}

// featureBody is bodyJSON(map{"input"}) without the map, like createBody.
func featureBody(input json.RawMessage) ([]byte, error) {
	if input == nil {
		return []byte(`{}`), nil
	}
	if rawPlain(input) {
		var buf bytes.Buffer
		buf.Grow(len(`{"input":}`) + len(input))
		buf.WriteString(`{"input":`)
		if json.Compact(&buf, input) == nil {
			buf.WriteByte('}')
			return buf.Bytes(), nil
		}
	}
	return bodyJSON(map[string]any{"input": input})
}

// marshalPlain reports whether json.Marshal writes s between quotes as it is: valid UTF-8 with
// no control character, quote, backslash, < > & (HTML escaping), U+2028 or U+2029.
func marshalPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return utf8.ValidString(s) && !strings.Contains(s, "\u2028") && !strings.Contains(s, "\u2029")
}

// rawPlain reports whether json.Marshal writes the (valid) raw value compacted and otherwise
// unchanged: valid UTF-8 without < > &, U+2028 or U+2029, which it would escape.
func rawPlain(raw []byte) bool {
	return utf8.Valid(raw) && !bytes.ContainsAny(raw, "<>&\u2028\u2029")
}

// marshalDetail is json.Marshal(detail), written directly for the usual {"operation": op}.
func marshalDetail(detail map[string]any) ([]byte, error) {
	if len(detail) == 1 {
		if op, ok := detail["operation"].(string); ok && marshalPlain(op) {
			return []byte(`{"operation":"` + op + `"}`), nil
		}
	}
	return json.Marshal(detail)
}
