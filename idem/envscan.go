package idem

import (
	"bytes"
	"encoding/json"
	"slices"
)

// An allocation-free reading of the envelopes this runner writes. scanEnvelope understands only
// the plain form — {"schemaVersion": 1, "policy": "...", "result": {flat ids and integers}},
// in any key order and spacing, with no escapes, no duplicate keys and nothing after it — and
// reports false for everything else; the json-based readers (the reference, kept as they were)
// then decide and word the errors. FuzzEnvelopeFastPath holds the two together.

const maxScanFields = 8

// span is raw[a:b].
type span struct{ a, b int }

type scanField struct {
	key, val span
	isStr    bool // val is a string (span includes the quotes)
}

type flatObject struct {
	span   span // the whole object, braces included
	fields [maxScanFields]scanField
	n      int
}

type scannedEnvelope struct {
	version span
	policy  span // without quotes
	result  flatObject
}

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipWS(raw []byte, i int) int {
	for i < len(raw) && isWS(raw[i]) {
		i++
	}
	return i
}

// plainByte is a string byte json.Marshal writes as it is (HTML escaping on): printable ASCII
// but the quote, the backslash and < > &.
func plainByte(c byte) bool {
	return c >= 0x20 && c <= 0x7e && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

// scanString reads a plain string at raw[i] == '"'; it returns the index after the closing quote.
func scanString(raw []byte, i int) (int, bool) {
	if i >= len(raw) || raw[i] != '"' {
		return 0, false
	}
	for i++; i < len(raw); i++ {
		c := raw[i]
		if c == '"' {
			return i + 1, true
		}
		if !plainByte(c) {
			return 0, false
		}
	}
	return 0, false
}

// scanUint reads a non-negative integer without leading zeros of at most 9 digits.
func scanUint(raw []byte, i int) (int, bool) {
	start := i
	for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
		i++
	}
	n := i - start
	if n == 0 || n > 9 || n > 1 && raw[start] == '0' {
		return 0, false
	}
	// A number must end where a delimiter or space begins.
	if i < len(raw) && !(isWS(raw[i]) || raw[i] == ',' || raw[i] == '}') {
		return 0, false
	}
	return i, true
}

func keyIs(raw []byte, k span, name string) bool { return string(raw[k.a+1:k.b-1]) == name }

// scanFlat reads a flat object of plain keys (no duplicates) whose values are plain strings or
// small non-negative integers.
func scanFlat(raw []byte, i int, o *flatObject) (int, bool) {
	if i >= len(raw) || raw[i] != '{' {
		return 0, false
	}
	o.span.a = i
	i = skipWS(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		o.span.b = i + 1
		return i + 1, true
	}
	for {
		if o.n == maxScanFields {
			return 0, false
		}
		f := &o.fields[o.n]
		var ok bool
		f.key.a = i
		if i, ok = scanString(raw, i); !ok {
			return 0, false
		}
		f.key.b = i
		for j := 0; j < o.n; j++ {
			if string(raw[o.fields[j].key.a:o.fields[j].key.b]) == string(raw[f.key.a:f.key.b]) {
				return 0, false
			}
		}
		i = skipWS(raw, i)
		if i >= len(raw) || raw[i] != ':' {
			return 0, false
		}
		i = skipWS(raw, i+1)
		f.val.a = i
		if f.isStr = i < len(raw) && raw[i] == '"'; f.isStr {
			i, ok = scanString(raw, i)
		} else {
			i, ok = scanUint(raw, i)
		}
		if !ok {
			return 0, false
		}
		f.val.b = i
		o.n++
		i = skipWS(raw, i)
		if i >= len(raw) {
			return 0, false
		}
		switch raw[i] {
		case ',':
			i = skipWS(raw, i+1)
		case '}':
			o.span.b = i + 1
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// scanEnvelope reads a plain, complete envelope of schemaVersion 1 with a policy that is not the
// legacy one and a flat result.
func scanEnvelope(raw []byte, e *scannedEnvelope) bool {
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return false
	}
	i = skipWS(raw, i+1)
	var seen [3]bool
	for {
		ka := i
		var ok bool
		if i, ok = scanString(raw, i); !ok {
			return false
		}
		key := span{ka, i}
		i = skipWS(raw, i)
		if i >= len(raw) || raw[i] != ':' {
			return false
		}
		i = skipWS(raw, i+1)
		switch {
		case keyIs(raw, key, "schemaVersion") && !seen[0]:
			seen[0] = true
			e.version.a = i
			if i, ok = scanUint(raw, i); !ok {
				return false
			}
			e.version.b = i
		case keyIs(raw, key, "policy") && !seen[1]:
			seen[1] = true
			e.policy.a = i + 1
			if i, ok = scanString(raw, i); !ok {
				return false
			}
			e.policy.b = i - 1
		case keyIs(raw, key, "result") && !seen[2]:
			seen[2] = true
			if i, ok = scanFlat(raw, i, &e.result); !ok {
				return false
			}
		default:
			return false
		}
		i = skipWS(raw, i)
		if i >= len(raw) {
			return false
		}
		if raw[i] == ',' {
			i = skipWS(raw, i+1)
			continue
		}
		if raw[i] != '}' {
			return false
		}
		if skipWS(raw, i+1) != len(raw) {
			return false
		}
		break
	}
	if !seen[0] || !seen[1] || !seen[2] || string(raw[e.version.a:e.version.b]) != "1" {
		return false
	}
	p := raw[e.policy.a:e.policy.b]
	return len(p) > 0 && string(p) != LegacyPolicy
}

// guardOK reports whether the scanned result is exactly the whitelist fields, each a ref value:
// what guardResult accepts. False leaves the wording to guardResult.
func (o *flatObject) guardOK(raw []byte, fields []string) bool {
	if o.n != len(fields) {
		return false
	}
	for _, name := range fields {
		f := o.field(raw, name)
		if f == nil {
			return false
		}
		if f.isStr {
			s := raw[f.val.a+1 : f.val.b-1]
			if len(s) == 0 || len(s) > maxRefString {
				return false
			}
			for _, c := range s {
				if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == ':' || c == '.') {
					return false
				}
			}
		}
	}
	return true
}

func (o *flatObject) field(raw []byte, name string) *scanField {
	for j := 0; j < o.n; j++ {
		if keyIs(raw, o.fields[j].key, name) {
			return &o.fields[j]
		}
	}
	return nil
}

// appendSorted appends the object compact, its keys sorted (json.Marshal of a map).
func (o *flatObject) appendSorted(dst, raw []byte) []byte {
	var idx [maxScanFields]int
	for j := range o.n {
		idx[j] = j
	}
	order := idx[:o.n]
	slices.SortFunc(order, func(x, y int) int {
		// Compare the keys without their quotes: "a b" sorts before "a".
		return bytes.Compare(raw[o.fields[x].key.a+1:o.fields[x].key.b-1], raw[o.fields[y].key.a+1:o.fields[y].key.b-1])
	})
	return o.appendIn(dst, raw, order)
}

// appendCompact appends the object compact, its keys in their order (json.Compact).
func (o *flatObject) appendCompact(dst, raw []byte) []byte {
	var idx [maxScanFields]int
	for j := range o.n {
		idx[j] = j
	}
	return o.appendIn(dst, raw, idx[:o.n])
}

func (o *flatObject) appendIn(dst, raw []byte, order []int) []byte {
	dst = append(dst, '{')
	for n, j := range order {
		if n > 0 {
			dst = append(dst, ',')
		}
		f := &o.fields[j]
		dst = append(dst, raw[f.key.a:f.key.b]...)
		dst = append(dst, ':')
		dst = append(dst, raw[f.val.a:f.val.b]...)
	}
	return append(dst, '}')
}

// canonical is CanonicalEnvelope of a scanned envelope.
func (e *scannedEnvelope) canonical(raw []byte) json.RawMessage {
	p := raw[e.policy.a:e.policy.b]
	v := raw[e.version.a:e.version.b]
	out := make([]byte, 0, len(raw)+len(`{"policy":"","result":,"schemaVersion":}`))
	out = append(out, `{"policy":"`...)
	out = append(out, p...)
	out = append(out, `","result":`...)
	out = e.result.appendSorted(out, raw)
	out = append(out, `,"schemaVersion":`...)
	out = append(out, v...)
	return append(out, '}')
}
