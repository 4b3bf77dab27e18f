package jsonb

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Kind says why a value was refused.
type Kind int

// The reasons a value is refused.
const (
	Syntax        Kind = iota + 1 // not JSON (or more than one value)
	DuplicateName                 // an object names a member twice
	InvalidUTF8                   // invalid UTF-8, or a lone UTF-16 surrogate escape
	NUL                           // the NUL character (\u0000), which jsonb cannot store
	Number                        // a number outside what PostgreSQL's numeric holds
	TooDeep                       // nested deeper than Limits.MaxDepth
	TooLarge                      // canonical text longer than Limits.MaxBytes
)

// Error is a refused value. Pointer is the RFC 6901 pointer of the offending member within the
// value that was read ("" for the value itself).
type Error struct {
	Kind    Kind
	Pointer string
	Detail  string
}

func (e *Error) Error() string {
	if e.Pointer == "" {
		return e.Detail
	}
	return e.Pointer + ": " + e.Detail
}

// Path renders the pointer after prefix the way messages name fields: prefix.a.b[2].
func (e *Error) Path(prefix string) string { return Path(prefix, e.Pointer) }

// Path renders an RFC 6901 pointer after prefix as prefix.a.b[2]: a token of digits is an index.
func Path(prefix, pointer string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for tok := range jsontext.Pointer(pointer).Tokens() {
		if tok != "" && strings.Trim(tok, "0123456789") == "" {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// Limits bound a value while it is read. Zero means no limit of that kind.
type Limits struct {
	MaxDepth int // containers nested in one another; the value's own counts as 1
	MaxBytes int // length of the canonical text
}

// Limits of PostgreSQL's numeric, which jsonb keeps numbers in: 32767 base-10000 digits before
// the decimal point (131072 decimal digits), a display scale of at most 16383, and an exponent
// as written below INT_MAX/2.
const (
	maxNumericIntDigits = 131072
	maxNumericScale     = 16383
	maxNumericExponent  = 1<<30 - 1
)

// state is one reading: a decoder over the input and the scratch space of the rendering.
type state struct {
	src     bytes.Reader
	dec     jsontext.Decoder
	raw     []byte
	out     []byte
	keys    []byte // the unescaped names of the objects being read, for sorting
	members []member
	tmp     []byte
	lim     Limits
	depth   int
}

// member is one object member being read: its name is keys[ka:kb]; its rendered name and value
// are out[start:mid] and out[mid:end].
type member struct{ ka, kb, start, mid, end int }

var states = sync.Pool{New: func() any { return new(state) }}

func newState(raw []byte, lim Limits) *state {
	s := states.Get().(*state)
	s.src.Reset(raw)
	s.dec.Reset(&s.src)
	s.raw, s.lim, s.depth = raw, lim, 0
	s.out, s.keys, s.members = s.out[:0], s.keys[:0], s.members[:0]
	return s
}

func (s *state) release() {
	s.raw = nil
	if cap(s.out) > 64<<10 || cap(s.tmp) > 64<<10 {
		s.out, s.tmp = nil, nil // do not keep a huge buffer alive in the pool
	}
	states.Put(s)
}

// Canonical returns the canonical text of the one JSON value in raw (surrounding whitespace
// allowed), or an *Error.
func Canonical(raw []byte, lim Limits) ([]byte, error) {
	s := newState(raw, lim)
	defer s.release()
	if err := s.value(); err != nil {
		return nil, err
	}
	if err := s.end(); err != nil {
		return nil, err
	}
	return bytes.Clone(s.out), nil
}

// Check reports what Canonical would refuse in raw, without keeping the rendering.
func Check(raw []byte, lim Limits) error {
	s := newState(raw, lim)
	defer s.release()
	if err := s.value(); err != nil {
		return err
	}
	return s.end()
}

// IsCanonical reports whether raw is already exactly its canonical text.
func IsCanonical(raw []byte) bool {
	s := newState(raw, Limits{})
	defer s.release()
	return s.value() == nil && s.end() == nil && bytes.Equal(s.out, raw)
}

func (s *state) end() error {
	if _, err := s.dec.ReadToken(); err != io.EOF {
		return s.fail(err, "more than one JSON value")
	}
	return nil
}

// fail turns a decoder error into an *Error; what words an error that is not a decoder's.
func (s *state) fail(err error, what string) error {
	var je *Error
	if errors.As(err, &je) {
		return je
	}
	if je := Explain(s.raw, err); je != nil {
		return je
	}
	if err == nil || err == io.EOF || err == io.ErrUnexpectedEOF {
		return &Error{Kind: Syntax, Detail: "not valid JSON: unexpected end of input"}
	}
	return &Error{Kind: Syntax, Detail: what}
}

// Explain words a json v2 syntactic error met while decoding raw as the boundary refuses it
// (the same kinds and words as Canonical): a duplicate name, invalid UTF-8, a lone surrogate
// escape, or JSON that is not valid at a byte. It returns nil for any other error.
func Explain(raw []byte, err error) *Error {
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) {
		return nil
	}
	ptr := string(se.JSONPointer)
	switch {
	case errors.Is(se.Err, io.ErrUnexpectedEOF):
		return &Error{Kind: Syntax, Detail: "unexpected end of JSON"}
	case errors.Is(se.Err, jsontext.ErrDuplicateName):
		return &Error{Kind: DuplicateName, Pointer: ptr, Detail: "the name appears twice in one object (a duplicate is refused, never resolved \"last wins\")"}
	case badUTF8At(raw, se.ByteOffset):
		return &Error{Kind: InvalidUTF8, Pointer: ptr, Detail: "not valid UTF-8"}
	case surrogateAt(raw, se.ByteOffset):
		return &Error{Kind: InvalidUTF8, Pointer: ptr, Detail: "a lone UTF-16 surrogate escape (\\uD800-\\uDFFF without its pair) is not a character"}
	}
	msg := strings.TrimPrefix(se.Err.Error(), "jsontext: ")
	return &Error{Kind: Syntax, Pointer: ptr, Detail: fmt.Sprintf("not valid JSON at byte %d: %s", se.ByteOffset, msg)}
}

func badUTF8At(raw []byte, off int64) bool {
	if off < 0 || off >= int64(len(raw)) || raw[off] < utf8.RuneSelf {
		return false
	}
	r, n := utf8.DecodeRune(raw[off:])
	return r == utf8.RuneError && n <= 1
}

func surrogateAt(raw []byte, off int64) bool {
	if off < 0 || off+6 > int64(len(raw)) || raw[off] != '\\' || raw[off+1] != 'u' {
		return false
	}
	v, err := strconv.ParseUint(string(raw[off+2:off+6]), 16, 16)
	return err == nil && v >= 0xD800 && v <= 0xDFFF
}

func (s *state) pointer() string { return string(s.dec.StackPointer()) }

func (s *state) checkSize() error {
	if s.lim.MaxBytes > 0 && len(s.out) > s.lim.MaxBytes {
		return &Error{Kind: TooLarge, Pointer: s.pointer(), Detail: fmt.Sprintf("exceeds the %d-byte limit in its canonical form (as PostgreSQL stores and prints it)", s.lim.MaxBytes)}
	}
	return nil
}

// value reads one value and appends its canonical text to s.out.
func (s *state) value() error {
	switch s.dec.PeekKind() {
	case '{':
		return s.object()
	case '[':
		return s.array()
	case '"':
		v, err := s.dec.ReadValue()
		if err != nil {
			return s.fail(err, "not valid JSON")
		}
		if s.out, err = appendStringValue(s.out, v); err != nil {
			return &Error{Kind: NUL, Pointer: s.pointer(), Detail: err.Error()}
		}
		return s.checkSize()
	case '0':
		v, err := s.dec.ReadValue()
		if err != nil {
			return s.fail(err, "not valid JSON")
		}
		room := 0
		if s.lim.MaxBytes > 0 {
			room = max(s.lim.MaxBytes-len(s.out), 1)
		}
		if s.out, err = appendNumber(s.out, v, room); err != nil {
			var big *numberTooLong
			if errors.As(err, &big) {
				return &Error{Kind: TooLarge, Pointer: s.pointer(), Detail: fmt.Sprintf("exceeds the %d-byte limit with its numbers written out as PostgreSQL stores them (%.32s prints as %d characters)", s.lim.MaxBytes, big.lit, big.n)}
			}
			return &Error{Kind: Number, Pointer: s.pointer(), Detail: err.Error()}
		}
		return s.checkSize()
	case 'n', 't', 'f':
		v, err := s.dec.ReadValue()
		if err != nil {
			return s.fail(err, "not valid JSON")
		}
		s.out = append(s.out, v...)
		return s.checkSize()
	}
	_, err := s.dec.ReadToken()
	return s.fail(err, "not valid JSON")
}

func (s *state) open() error {
	if _, err := s.dec.ReadToken(); err != nil {
		return s.fail(err, "not valid JSON")
	}
	if s.depth++; s.lim.MaxDepth > 0 && s.depth > s.lim.MaxDepth {
		return &Error{Kind: TooDeep, Pointer: s.pointer(), Detail: fmt.Sprintf("nested deeper than %d levels", s.lim.MaxDepth)}
	}
	return nil
}

func (s *state) close() error {
	if _, err := s.dec.ReadToken(); err != nil {
		return s.fail(err, "not valid JSON")
	}
	s.depth--
	return s.checkSize()
}

func (s *state) array() error {
	if err := s.open(); err != nil {
		return err
	}
	s.out = append(s.out, '[')
	for n := 0; ; n++ {
		switch s.dec.PeekKind() {
		case ']':
			s.out = append(s.out, ']')
			return s.close()
		case 0:
			_, err := s.dec.ReadToken()
			return s.fail(err, "not valid JSON")
		}
		if n > 0 {
			s.out = append(s.out, ", "...)
		}
		if err := s.value(); err != nil {
			return err
		}
	}
}

// object reads the members as they come (rendered name, then value), then writes them again in
// jsonb's order: shorter names first, equal lengths bytewise.
func (s *state) object() error {
	if err := s.open(); err != nil {
		return err
	}
	base, start, keys := len(s.members), len(s.out), len(s.keys)
	for {
		k := s.dec.PeekKind()
		if k == '}' {
			break
		}
		if k != '"' {
			_, err := s.dec.ReadToken()
			return s.fail(err, "not valid JSON")
		}
		name, err := s.dec.ReadValue() // checks the name is not a duplicate
		if err != nil {
			return s.fail(err, "not valid JSON")
		}
		m := member{ka: len(s.keys), start: len(s.out)}
		if s.keys, err = appendUnquoted(s.keys, name); err != nil {
			return &Error{Kind: NUL, Pointer: s.pointer(), Detail: "a name holds " + err.Error()}
		}
		m.kb = len(s.keys)
		s.out = AppendString(s.out, s.keys[m.ka:m.kb])
		m.mid = len(s.out)
		if err := s.value(); err != nil {
			return err
		}
		m.end = len(s.out)
		s.members = append(s.members, m)
	}
	ms := s.members[base:]
	slices.SortFunc(ms, func(a, b member) int {
		ka, kb := s.keys[a.ka:a.kb], s.keys[b.ka:b.kb]
		if len(ka) != len(kb) {
			return len(ka) - len(kb)
		}
		return bytes.Compare(ka, kb)
	})
	s.tmp = append(s.tmp[:0], s.out[start:]...)
	s.out = append(s.out[:start], '{')
	for i, m := range ms {
		if i > 0 {
			s.out = append(s.out, ", "...)
		}
		s.out = append(s.out, s.tmp[m.start-start:m.mid-start]...)
		s.out = append(s.out, ": "...)
		s.out = append(s.out, s.tmp[m.mid-start:m.end-start]...)
	}
	s.out = append(s.out, '}')
	s.members, s.keys = s.members[:base], s.keys[:keys]
	return s.close()
}

var errNUL = errors.New("a NUL character (\\u0000), which PostgreSQL jsonb cannot store")

// appendUnquoted appends the contents of a quoted JSON string the decoder has validated.
func appendUnquoted(dst, quoted []byte) ([]byte, error) {
	inner := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return append(dst, inner...), nil
	}
	n := len(dst)
	dst, err := jsontext.AppendUnquote(dst, quoted)
	if err != nil {
		return dst, err
	}
	if bytes.IndexByte(dst[n:], 0) >= 0 {
		return dst, errNUL
	}
	return dst, nil
}

// appendStringValue appends a quoted JSON string (validated) in jsonb's escaping.
func appendStringValue(dst, quoted []byte) ([]byte, error) {
	inner := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return AppendString(dst, inner), nil // nothing to unescape, and nothing jsonb escapes
	}
	var buf [256]byte
	s, err := appendUnquoted(buf[:0], quoted)
	if err != nil {
		return dst, err
	}
	return AppendString(dst, s), nil
}

// AppendString appends s quoted as PostgreSQL's escape_json writes it: \" \\ \b \f \n \r \t,
// any other character below U+0020 as \u00XX (lower-case hex), everything else as it is.
// s must be valid UTF-8 without NUL.
func AppendString[S string | []byte](dst []byte, s S) []byte {
	// Room for the text and its quotes at once: appending from nil would otherwise grow dst
	// several times over for one string (escapes, which are rare, may still grow it).
	dst = slices.Grow(dst, len(s)+2)
	dst = append(dst, '"')
	last := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[last:i]...)
		last = i + 1
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			const hex = "0123456789abcdef"
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
	}
	dst = append(dst, s[last:]...)
	return append(dst, '"')
}

// appendNumber appends a JSON number literal (valid JSON syntax) as numeric_in then numeric_out
// render it: no exponent, no leading zeros, no negative zero, and as many digits after the point
// as were written after it less the exponent (1e3 is 1000, 1.50 is 1.50, 15e-1 is 1.5). It fails
// for a number PostgreSQL refuses ("value overflows numeric format"), and when the rendering
// would be longer than room (room <= 0: no limit).
func appendNumber(dst, lit []byte, room int) ([]byte, error) {
	neg := lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	mant, expPart := lit, []byte(nil)
	if i := bytes.IndexAny(lit, "eE"); i >= 0 {
		mant, expPart = lit[:i], lit[i+1:]
	}
	intPart, frac := mant, []byte(nil)
	if i := bytes.IndexByte(mant, '.'); i >= 0 {
		intPart, frac = mant[:i], mant[i+1:]
	}
	exp := 0
	if len(expPart) > 0 {
		negExp := expPart[0] == '-'
		digits := bytes.TrimLeft(bytes.TrimLeft(expPart, "+-"), "0")
		if len(digits) > 10 {
			return dst, errOverflow(lit)
		}
		e, _ := strconv.ParseInt(string(digits), 10, 64) // "" is 0
		if e >= maxNumericExponent {
			return dst, errOverflow(lit)
		}
		exp = int(e)
		if negExp {
			exp = -exp
		}
	}
	// The digits without the point, and where the point goes once the exponent is applied.
	nDigits := len(intPart) + len(frac)
	point := len(intPart) + exp
	scale := max(nDigits-point, 0)
	if scale > maxNumericScale {
		return dst, errOverflow(lit)
	}
	digit := func(i int) byte { // i-th digit of intPart+frac, zero outside
		switch {
		case i < 0 || i >= nDigits:
			return '0'
		case i < len(intPart):
			return intPart[i]
		}
		return frac[i-len(intPart)]
	}
	first := -1 // the first non-zero digit
	for i := range nDigits {
		if digit(i) != '0' {
			first = i
			break
		}
	}
	intDigits := 0 // digits before the point, leading zeros dropped
	if first >= 0 && first < point {
		intDigits = point - first
	}
	if intDigits > maxNumericIntDigits {
		return dst, errOverflow(lit)
	}
	n := max(intDigits, 1)
	if scale > 0 {
		n += 1 + scale
	}
	if first >= 0 && neg {
		n++ // zero has no sign
	}
	if room > 0 && n > room {
		return dst, &numberTooLong{lit: string(lit), n: n}
	}
	dst = slices.Grow(dst, n)
	if first >= 0 && neg {
		dst = append(dst, '-')
	}
	if intDigits == 0 {
		dst = append(dst, '0')
	} else {
		for i := point - intDigits; i < point; i++ {
			dst = append(dst, digit(i))
		}
	}
	if scale > 0 {
		dst = append(dst, '.')
		for i := point; i < point+scale; i++ {
			dst = append(dst, digit(i))
		}
	}
	return dst, nil
}

// numberTooLong is appendNumber's error for a rendering longer than the room left.
type numberTooLong struct {
	lit string
	n   int
}

func (e *numberTooLong) Error() string {
	return fmt.Sprintf("the number %.32s prints as %d characters", e.lit, e.n)
}

func errOverflow(lit []byte) error {
	return fmt.Errorf("the number %.32s is outside what PostgreSQL jsonb can store (at most %d digits before the decimal point and %d after)",
		lit, maxNumericIntDigits, maxNumericScale)
}

// Member is one member of an object to write: its name and its value's canonical text.
type Member struct {
	Name  string
	Value []byte
}

// AppendObject appends the canonical text of an object of distinct members, in jsonb's order;
// a member whose Value is nil is left out. It sorts members in place.
func AppendObject(dst []byte, members ...Member) []byte {
	slices.SortFunc(members, func(a, b Member) int {
		if len(a.Name) != len(b.Name) {
			return len(a.Name) - len(b.Name)
		}
		return strings.Compare(a.Name, b.Name)
	})
	need := 2
	for _, m := range members {
		if m.Value != nil {
			need += len(m.Name) + len(m.Value) + 6 // the quoted name, ": " and ", "
		}
	}
	dst = slices.Grow(dst, need)
	dst = append(dst, '{')
	first := true
	for _, m := range members {
		if m.Value == nil {
			continue
		}
		if !first {
			dst = append(dst, ", "...)
		}
		first = false
		dst = AppendString(dst, m.Name)
		dst = append(dst, ": "...)
		dst = append(dst, m.Value...)
	}
	return append(dst, '}')
}
