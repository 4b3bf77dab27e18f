package kernel

// A feature run's JSON on the client: the stored payload decoded for the module's rules and
// the feature, then its next payload and output written as canonical jsonb text. These run on
// every feature run, between its two round trips, so they are written for the values features
// actually hold (objects, arrays, strings, small integers, booleans, null) without reflection;
// anything else — and anything a fast path would have to judge (invalid UTF-8, NUL, a number
// that is not a plain integer, a value past the limits) — takes the general path (json v2 and
// package jsonb), which decides and words it exactly as before.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/idemwork/idemwork/jsonb"
	"github.com/idemwork/idemwork/model"
)

// decodeObject decodes a JSON object as encoding/json with UseNumber does: objects as
// map[string]any, arrays as []any, numbers as json.Number, strings, booleans and nil; null is a
// nil map. It reads the tokens of json v2's decoder (jsontext) directly: the same syntax, UTF-8
// and duplicate-name checks as json v2's Unmarshal, whose result it equals
// (TestDecodeObjectDecodesAsJSONv2Does), without its reflection.
func decodeObject(raw json.RawMessage) (map[string]any, error) {
	if string(raw) == "{}" {
		return map[string]any{}, nil // a feature run's input when none was given
	}
	d := objectDecoders.Get().(*objectDecoder)
	defer d.release()
	d.src.Reset(raw)
	d.dec.Reset(&d.src)
	m, err := d.object()
	if err != nil {
		return nil, fmt.Errorf("decode object: %w", err)
	}
	if _, err := d.dec.ReadToken(); !errors.Is(err, io.EOF) {
		if err == nil {
			err = errors.New("unexpected data after the value")
		}
		return nil, fmt.Errorf("decode object: %w", err)
	}
	return m, nil
}

// objectDecoder is a reusable jsontext decoder over one input.
type objectDecoder struct {
	src bytes.Reader
	dec jsontext.Decoder
}

var objectDecoders = sync.Pool{New: func() any { return new(objectDecoder) }}

func (d *objectDecoder) release() {
	d.src.Reset(nil)
	d.dec.Reset(&d.src)
	objectDecoders.Put(d)
}

var errNotObject = errors.New("cannot unmarshal a JSON value other than an object into a Go map")

// object reads the top-level value: an object, or null (a nil map, as json v2 leaves it).
func (d *objectDecoder) object() (map[string]any, error) {
	switch d.dec.PeekKind() {
	case 'n':
		if _, err := d.dec.ReadToken(); err != nil {
			return nil, err
		}
		return nil, nil
	case '{':
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		return v.(map[string]any), nil
	case 0:
		_, err := d.dec.ReadToken()
		return nil, err
	}
	if err := d.dec.SkipValue(); err != nil {
		return nil, err
	}
	return nil, errNotObject
}

// value reads one value.
func (d *objectDecoder) value() (any, error) {
	switch d.dec.PeekKind() {
	case '0':
		lit, err := d.dec.ReadValue()
		if err != nil {
			return nil, err
		}
		return json.Number(lit), nil
	case '{':
		if _, err := d.dec.ReadToken(); err != nil {
			return nil, err
		}
		m := map[string]any{}
		for d.dec.PeekKind() != '}' {
			tok, err := d.dec.ReadToken() // a string (the decoder refuses anything else here), never a duplicate
			if err != nil {
				return nil, err
			}
			name := tok.String() // before the next read voids tok
			v, err := d.value()
			if err != nil {
				return nil, err
			}
			m[name] = v
		}
		_, err := d.dec.ReadToken()
		return m, err
	case '[':
		if _, err := d.dec.ReadToken(); err != nil {
			return nil, err
		}
		a := []any{}
		for d.dec.PeekKind() != ']' {
			v, err := d.value()
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := d.dec.ReadToken()
		return a, err
	}
	tok, err := d.dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case '"':
		return tok.String(), nil
	case 't', 'f':
		return tok.Bool(), nil
	}
	return nil, nil // null
}

// canonicalObject is the canonical text of a feature's next payload, as
// model.CanonicalObject(field, marshalValue(v)) writes it (or refuses it).
func canonicalObject(field string, v map[string]any) (json.RawMessage, error) {
	if out, ok := appendCanonical(nil, v, objectMaxDepth, objectMaxBytes); ok && out[0] == '{' {
		return out, nil
	}
	b, err := marshalValue(v)
	if err != nil {
		return nil, err
	}
	return model.CanonicalObject(field, b)
}

// canonicalJSON is the canonical text of v (a feature's output), as jsonb.Canonical writes
// marshalValue(v).
func canonicalJSON(v any) (json.RawMessage, error) {
	if out, ok := appendCanonical(nil, v, -1, -1); ok {
		return out, nil
	}
	b, err := marshalValue(v)
	if err != nil {
		return nil, err
	}
	return jsonb.Canonical(b, jsonb.Limits{})
}

// The bounds of a payload (model.CanonicalObject's): past them the general path refuses it.
const (
	objectMaxDepth = model.MaxJSONDepth
	objectMaxBytes = model.MaxJSONBytes
)

// appendCanonical appends the canonical jsonb text of v — what jsonb.Canonical makes of
// marshalValue(v) — for the values it knows to write byte for byte alike; ok is false for any
// other (the caller then takes the general path). depth and room bound the containers and the
// length as the general path's limits do (negative: no bound); a value past them is left to it
// as well, to be refused there.
func appendCanonical(dst []byte, v any, depth, room int) (out []byte, ok bool) {
	start := len(dst)
	out, ok = appendValue(dst, v, depth)
	if ok && room >= 0 && len(out)-start > room {
		return dst, false
	}
	return out, ok
}

func appendValue(dst []byte, v any, depth int) ([]byte, bool) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), true
	case bool:
		return strconv.AppendBool(dst, v), true
	case string:
		if !plainString(v) {
			return dst, false
		}
		return jsonb.AppendString(dst, v), true
	case int:
		return strconv.AppendInt(dst, int64(v), 10), true
	case json.Number:
		if !plainInteger(string(v)) {
			return dst, false // jsonb renders other numbers (1.50, 1e3, -0) in its own way
		}
		return append(dst, v...), true
	case map[string]any:
		if v == nil {
			return append(dst, "null"...), true // marshalValue writes a nil map as null
		}
		if depth == 0 {
			return dst, false
		}
		return appendObject(dst, v, depth-1)
	case []any:
		if v == nil {
			return append(dst, "null"...), true
		}
		if depth == 0 {
			return dst, false
		}
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			var ok bool
			if dst, ok = appendValue(dst, e, depth-1); !ok {
				return dst, false
			}
		}
		return append(dst, ']'), true
	}
	return dst, false
}

// appendObject writes m's members in jsonb's order: shorter names first, equal lengths bytewise.
func appendObject(dst []byte, m map[string]any, depth int) ([]byte, bool) {
	var buf [8]string
	names := buf[:0]
	for k := range m {
		if !plainString(k) {
			return dst, false
		}
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	dst = append(dst, '{')
	for i, k := range names {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = append(jsonb.AppendString(dst, k), ": "...)
		var ok bool
		if dst, ok = appendValue(dst, m[k], depth); !ok {
			return dst, false
		}
	}
	return append(dst, '}'), true
}

// plainString reports whether s is written as jsonb.AppendString writes it by every path:
// valid UTF-8 (json v2 would replace invalid bytes) without NUL (which jsonb refuses).
func plainString(s string) bool {
	return strings.IndexByte(s, 0) < 0 && utf8.ValidString(s)
}

// plainInteger reports whether lit is an integer literal jsonb keeps as written: digits, a
// leading minus, no leading zero, not -0.
func plainInteger(lit string) bool {
	if strings.HasPrefix(lit, "-") {
		lit = lit[1:]
		if lit == "0" {
			return false
		}
	}
	if lit == "" || len(lit) > 18 || (lit[0] == '0' && len(lit) > 1) {
		return false
	}
	for i := 0; i < len(lit); i++ {
		if lit[i] < '0' || lit[i] > '9' {
			return false
		}
	}
	return true
}
