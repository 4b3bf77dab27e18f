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
	if marshalPlain(title) && (summary == nil || marshalPlain(*summary)) {
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
			ok = appendRaw(&buf, payload)
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
	var buf bytes.Buffer
	buf.Grow(len(`{"input":}`) + len(input))
	buf.WriteString(`{"input":`)
	if appendRaw(&buf, input) {
		buf.WriteByte('}')
		return buf.Bytes(), nil
	}
	return bodyJSON(map[string]any{"input": input})
}

// appendRaw appends raw as json.Marshal writes a json.RawMessage (compacted, HTML-escaped) and
// reports whether it could; on false the caller takes the json.Marshal path, which also words
// the error for invalid JSON.
func appendRaw(buf *bytes.Buffer, raw []byte) bool {
	if alreadyMarshaled(raw) {
		buf.Write(raw) // the usual case: one scan, no copy through the json scanner
		return true
	}
	return rawPlain(raw) && json.Compact(buf, raw) == nil
}

// alreadyMarshaled reports whether json.Marshal writes raw unchanged: a JSON object shapeOK
// accepts (so valid), with no whitespace between tokens and nothing Marshal escapes (< > &,
// U+2028, U+2029) inside its strings.
func alreadyMarshaled(raw []byte) bool {
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case inString:
			switch c {
			case '\\':
				i++ // the escaped byte cannot end the string
			case '"':
				inString = false
			case '<', '>', '&':
				return false
			case 0xE2: // U+2028 and U+2029 are E2 80 A8 and E2 80 A9
				if i+2 < len(raw) && raw[i+1] == 0x80 && (raw[i+2] == 0xA8 || raw[i+2] == 0xA9) {
					return false
				}
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return false
		}
	}
	return shapeOK(raw, 0)
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
