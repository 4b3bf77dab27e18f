package kernel

import "unicode/utf8"

// shapeOK is the allocation-free fast path of checkJSONShape: it reports true only for input
// the token-based check accepts — one JSON object, nothing but whitespace after it, depth at most
// MaxJSONDepth, every number storable by jsonb and, with maxBytes > 0, the stored size within
// maxBytes. Anything it is unsure of (a \u escape, for one) makes it report false, and the
// token-based check then decides and words the error. FuzzShapeMatchesTokens holds the two
// together.
func shapeOK(raw []byte, maxBytes int) bool {
	if !utf8.Valid(raw) {
		return false
	}
	s := shapeScanner{raw: raw, stored: len(raw), maxBytes: maxBytes}
	s.ws()
	if s.i >= len(raw) || raw[s.i] != '{' {
		return false
	}
	if !s.value(0) {
		return false
	}
	s.ws()
	return s.i == len(raw)
}

type shapeScanner struct {
	raw      []byte
	i        int
	stored   int
	maxBytes int
}

func (s *shapeScanner) ws() {
	for s.i < len(s.raw) {
		switch s.raw[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value scans one value at s.i; depth is the number of containers around it.
func (s *shapeScanner) value(depth int) bool {
	if s.i >= len(s.raw) {
		return false
	}
	switch c := s.raw[s.i]; {
	case c == '{':
		if depth+1 > MaxJSONDepth {
			return false
		}
		s.i++
		s.ws()
		if s.i < len(s.raw) && s.raw[s.i] == '}' {
			s.i++
			return true
		}
		for {
			s.ws()
			if s.i >= len(s.raw) || s.raw[s.i] != '"' || !s.str() {
				return false
			}
			s.ws()
			if s.i >= len(s.raw) || s.raw[s.i] != ':' {
				return false
			}
			s.i++
			s.ws()
			if !s.value(depth + 1) {
				return false
			}
			s.ws()
			if s.i >= len(s.raw) {
				return false
			}
			switch s.raw[s.i] {
			case ',':
				s.i++
			case '}':
				s.i++
				return true
			default:
				return false
			}
		}
	case c == '[':
		if depth+1 > MaxJSONDepth {
			return false
		}
		s.i++
		s.ws()
		if s.i < len(s.raw) && s.raw[s.i] == ']' {
			s.i++
			return true
		}
		for {
			s.ws()
			if !s.value(depth + 1) {
				return false
			}
			s.ws()
			if s.i >= len(s.raw) {
				return false
			}
			switch s.raw[s.i] {
			case ',':
				s.i++
			case ']':
				s.i++
				return true
			default:
				return false
			}
		}
	case c == '"':
		return s.str()
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.num()
	}
	return false
}

func (s *shapeScanner) lit(w string) bool {
	if len(s.raw)-s.i < len(w) || string(s.raw[s.i:s.i+len(w)]) != w {
		return false
	}
	s.i += len(w)
	return true
}

// str scans a string at s.i (on its opening quote). Escapes other than \u are accepted; a \u
// escape (a NUL or a lone surrogate may hide there) is left to the token-based check.
func (s *shapeScanner) str() bool {
	s.i++
	for s.i < len(s.raw) {
		c := s.raw[s.i]
		switch {
		case c == '"':
			s.i++
			return true
		case c == '\\':
			if s.i+1 >= len(s.raw) {
				return false
			}
			switch s.raw[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			default:
				return false
			}
		case c < 0x20:
			return false
		default:
			s.i++
		}
	}
	return false
}

// num scans a number literal and applies the jsonb limits to it.
func (s *shapeScanner) num() bool {
	start := s.i
	raw := s.raw
	if raw[s.i] == '-' {
		s.i++
	}
	if s.i >= len(raw) {
		return false
	}
	switch c := raw[s.i]; {
	case c == '0':
		s.i++
	case c >= '1' && c <= '9':
		for s.i < len(raw) && raw[s.i] >= '0' && raw[s.i] <= '9' {
			s.i++
		}
	default:
		return false
	}
	if s.i < len(raw) && raw[s.i] == '.' {
		s.i++
		d := s.i
		for s.i < len(raw) && raw[s.i] >= '0' && raw[s.i] <= '9' {
			s.i++
		}
		if s.i == d {
			return false
		}
	}
	if s.i < len(raw) && (raw[s.i] == 'e' || raw[s.i] == 'E') {
		s.i++
		if s.i < len(raw) && (raw[s.i] == '+' || raw[s.i] == '-') {
			s.i++
		}
		d := s.i
		for s.i < len(raw) && raw[s.i] >= '0' && raw[s.i] <= '9' {
			s.i++
		}
		if s.i == d {
			return false
		}
	}
	lit := raw[start:s.i]
	printed, ok := jsonbNumber(string(lit))
	if !ok {
		return false
	}
	if s.stored += printed - len(lit); s.maxBytes > 0 && s.stored > s.maxBytes {
		return false
	}
	return true
}
