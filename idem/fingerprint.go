package idem

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sync"
	"unicode/utf8"
)

// fastFingerprint computes Fingerprint without decoding the body into maps: it writes the same
// canonical JSON ({"body":…,"operation":…}, object keys sorted, no whitespace, numbers as
// written) straight from the bytes. It handles the plain form only — no string escapes, no
// duplicate keys, no U+2028/U+2029, nothing after the value, nesting at most canonMaxDepth — and
// reports false for anything else, which Fingerprint then hashes the encoding/json way.
// FuzzFingerprintFastPath holds the two together.
func fastFingerprint(operation string, body []byte) (string, bool) {
	bp := canonPool.Get().(*[]byte)
	defer canonPool.Put(bp)
	buf := append((*bp)[:0], `{"body":`...)
	i := skipWS(body, 0)
	if i == len(body) {
		return "", false // empty or blank: the reference decides (null, or an error)
	}
	var ok bool
	if buf, i, ok = appendCanon(buf, body, i, 0, true); !ok || skipWS(body, i) != len(body) {
		return "", false
	}
	buf = append(buf, `,"operation":`...)
	if buf, ok = appendCanonString(buf, operation); !ok {
		return "", false
	}
	buf = append(buf, '}')
	*bp = buf
	sum := sha256.Sum256(buf)
	return hex.EncodeToString(sum[:]), true
}

var canonPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const canonMaxDepth = 32

// appendCanonString appends s quoted when encoding/json (HTML escaping off) writes it unchanged.
func appendCanonString(dst []byte, s string) ([]byte, bool) {
	if !canonPlain(s) {
		return dst, false
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"'), true
}

// canonPlain reports whether the contents of a JSON string need no escaping and come out of a
// decode and an encode as they are: valid UTF-8 without quotes, backslashes, control characters,
// U+2028 or U+2029.
func canonPlain[S string | []byte](s S) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == '"' || c == '\\' {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == utf8.RuneError && n == 1 || r == '\u2028' || r == '\u2029' {
			return false
		}
		i += n
	}
	return true
}

// skipString returns the index after the plain string at raw[i] == '"'.
func skipString(raw []byte, i int) (int, bool) {
	j := i + 1
	for j < len(raw) && raw[j] != '"' {
		if raw[j] == '\\' {
			return 0, false
		}
		j++
	}
	if j >= len(raw) || !canonPlain(raw[i+1:j]) {
		return 0, false
	}
	return j + 1, true
}

// skipNumber returns the index after the JSON number at raw[i].
func skipNumber(raw []byte, i int) (int, bool) {
	if raw[i] == '-' {
		i++
	}
	if i >= len(raw) {
		return 0, false
	}
	switch c := raw[i]; {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
			i++
		}
	default:
		return 0, false
	}
	if i < len(raw) && raw[i] == '.' {
		i++
		d := i
		for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
			i++
		}
		if i == d {
			return 0, false
		}
	}
	if i < len(raw) && (raw[i] == 'e' || raw[i] == 'E') {
		i++
		if i < len(raw) && (raw[i] == '+' || raw[i] == '-') {
			i++
		}
		d := i
		for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
			i++
		}
		if i == d {
			return 0, false
		}
	}
	return i, true
}

type canonMember struct{ key, val span }

// appendCanon appends the canonical form of the value at raw[i]; it returns the index after it.
// With write false it only checks the value (the members of an object are checked, then sorted,
// then written, so each level of nesting is read a bounded number of times).
func appendCanon(dst, raw []byte, i, depth int, write bool) ([]byte, int, bool) {
	if i >= len(raw) || depth > canonMaxDepth {
		return dst, 0, false
	}
	switch c := raw[i]; {
	case c == '"':
		j, ok := skipString(raw, i)
		if !ok {
			return dst, 0, false
		}
		if write {
			dst = append(dst, raw[i:j]...)
		}
		return dst, j, true
	case c == '-' || c >= '0' && c <= '9':
		j, ok := skipNumber(raw, i)
		if !ok {
			return dst, 0, false
		}
		if write {
			dst = append(dst, raw[i:j]...)
		}
		return dst, j, true
	case c == 't' || c == 'f' || c == 'n':
		for _, w := range [...]string{"true", "false", "null"} {
			if len(raw)-i >= len(w) && string(raw[i:i+len(w)]) == w {
				if write {
					dst = append(dst, w...)
				}
				return dst, i + len(w), true
			}
		}
		return dst, 0, false
	case c == '[':
		if write {
			dst = append(dst, '[')
		}
		i = skipWS(raw, i+1)
		if i < len(raw) && raw[i] == ']' {
			if write {
				dst = append(dst, ']')
			}
			return dst, i + 1, true
		}
		for n := 0; ; n++ {
			if n > 0 && write {
				dst = append(dst, ',')
			}
			var ok bool
			if dst, i, ok = appendCanon(dst, raw, i, depth+1, write); !ok {
				return dst, 0, false
			}
			i = skipWS(raw, i)
			if i >= len(raw) {
				return dst, 0, false
			}
			switch raw[i] {
			case ',':
				i = skipWS(raw, i+1)
			case ']':
				if write {
					dst = append(dst, ']')
				}
				return dst, i + 1, true
			default:
				return dst, 0, false
			}
		}
	case c == '{':
		var arr [16]canonMember
		members := arr[:0]
		i = skipWS(raw, i+1)
		if i < len(raw) && raw[i] == '}' {
			if write {
				dst = append(dst, '{', '}')
			}
			return dst, i + 1, true
		}
		for {
			if i >= len(raw) || raw[i] != '"' {
				return dst, 0, false
			}
			var m canonMember
			var ok bool
			m.key.a = i
			if i, ok = skipString(raw, i); !ok {
				return dst, 0, false
			}
			m.key.b = i
			i = skipWS(raw, i)
			if i >= len(raw) || raw[i] != ':' {
				return dst, 0, false
			}
			i = skipWS(raw, i+1)
			m.val.a = i
			// Validate and measure the value; it is written after the keys are sorted.
			if _, i, ok = appendCanon(nil, raw, i, depth+1, false); !ok {
				return dst, 0, false
			}
			m.val.b = i
			if write {
				members = append(members, m)
			}
			i = skipWS(raw, i)
			if i >= len(raw) {
				return dst, 0, false
			}
			if raw[i] == '}' {
				i++
				break
			}
			if raw[i] != ',' {
				return dst, 0, false
			}
			i = skipWS(raw, i+1)
		}
		if !write {
			return dst, i, true
		}
		slices.SortFunc(members, func(x, y canonMember) int {
			// Compare the keys without their quotes: "a b" sorts before "a".
			return bytes.Compare(raw[x.key.a+1:x.key.b-1], raw[y.key.a+1:y.key.b-1])
		})
		dst = append(dst, '{')
		for n, m := range members {
			if n > 0 {
				if string(raw[members[n-1].key.a:members[n-1].key.b]) == string(raw[m.key.a:m.key.b]) {
					return dst, 0, false // a duplicate key: the reference keeps the last one
				}
				dst = append(dst, ',')
			}
			dst = append(dst, raw[m.key.a:m.key.b]...)
			dst = append(dst, ':')
			var ok bool
			if dst, _, ok = appendCanon(dst, raw, m.val.a, depth+1, true); !ok {
				return dst, 0, false
			}
		}
		return append(dst, '}'), i, true
	}
	return dst, 0, false
}
