package jsonb

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
)

// Reader reads one JSON object member by member, with the same decoder and the same refusals as
// Canonical: a request body is decoded once, its fields taken as they come.
type Reader struct{ s *state }

// NewReader reads raw; Close returns its scratch space.
func NewReader(raw []byte) *Reader { return &Reader{s: newState(raw, Limits{})} }

// Close releases the reader; it must not be used afterwards.
func (r *Reader) Close() {
	if r.s != nil {
		r.s.release()
		r.s = nil
	}
}

// WrongType is the Kind of a member whose value is not of the type the reader asked for.
const WrongType Kind = 100

// Object reads the object that is the whole input, calling member for each name (unescaped,
// valid until member returns); member must read the value (String, Int, Raw, ...) or skip it.
// Nothing may follow the object.
func (r *Reader) Object(member func(name []byte) error) error {
	s := r.s
	if k := s.dec.PeekKind(); k != '{' {
		if k == 0 {
			_, err := s.dec.ReadToken()
			return s.fail(err, "not valid JSON")
		}
		return &Error{Kind: WrongType, Detail: "must be a JSON object"}
	}
	if _, err := s.dec.ReadToken(); err != nil {
		return s.fail(err, "not valid JSON")
	}
	for {
		k := s.dec.PeekKind()
		if k == '}' {
			break
		}
		if k != '"' {
			_, err := s.dec.ReadToken()
			return s.fail(err, "not valid JSON")
		}
		quoted, err := s.dec.ReadValue() // checks the name is not a duplicate
		if err != nil {
			return s.fail(err, "not valid JSON")
		}
		// The decoder's buffer moves on as the value is read: the name is copied out.
		if s.name, err = appendUnquoted(s.name[:0], quoted); err != nil {
			return &Error{Kind: NUL, Pointer: s.pointer(), Detail: "a name holds " + err.Error()}
		}
		if err := member(s.name); err != nil {
			return err
		}
	}
	if _, err := s.dec.ReadToken(); err != nil {
		return s.fail(err, "not valid JSON")
	}
	return s.end()
}

func (r *Reader) wrong(want string) error {
	return &Error{Kind: WrongType, Pointer: r.s.pointer(), Detail: "must be " + want}
}

// Null reports whether the next value is null, and reads it if so.
func (r *Reader) Null() (bool, error) {
	if r.s.dec.PeekKind() != 'n' {
		return false, nil
	}
	_, err := r.s.dec.ReadValue()
	return true, r.fail(err)
}

func (r *Reader) fail(err error) error {
	if err == nil {
		return nil
	}
	return r.s.fail(err, "not valid JSON")
}

// String reads a string value.
func (r *Reader) String() (string, error) {
	if r.s.dec.PeekKind() != '"' {
		if err := r.Skip(); err != nil {
			return "", err
		}
		return "", r.wrong("a string")
	}
	v, err := r.s.dec.ReadValue()
	if err != nil {
		return "", r.fail(err)
	}
	var buf [128]byte
	b, err := appendUnquoted(buf[:0], v)
	if err != nil {
		return "", &Error{Kind: NUL, Pointer: r.s.pointer(), Detail: "holds " + err.Error()}
	}
	return string(b), nil
}

// Int reads an integer value that fits an int.
func (r *Reader) Int() (int, error) {
	if r.s.dec.PeekKind() != '0' {
		if err := r.Skip(); err != nil {
			return 0, err
		}
		return 0, r.wrong("an integer")
	}
	v, err := r.s.dec.ReadValue()
	if err != nil {
		return 0, r.fail(err)
	}
	n, perr := strconv.ParseInt(string(v), 10, 64)
	if perr != nil || n > math.MaxInt32 || n < math.MinInt32 {
		return 0, r.wrong(fmt.Sprintf("an integer between %d and %d", math.MinInt32, math.MaxInt32))
	}
	return int(n), nil
}

// Raw reads any value and returns a copy of its bytes as written (checked: no duplicate names,
// valid UTF-8).
func (r *Reader) Raw() ([]byte, error) {
	v, err := r.s.dec.ReadValue()
	if err != nil {
		return nil, r.fail(err)
	}
	return bytes.Clone(v), nil
}

// RawView reads any value like Raw but returns it as a slice of the input itself (no copy): valid
// as long as the caller's input is.
func (r *Reader) RawView() ([]byte, error) {
	v, err := r.s.dec.ReadValue()
	if err != nil {
		return nil, r.fail(err)
	}
	end := int(r.s.dec.InputOffset())
	return r.s.raw[end-len(v) : end : end], nil
}

// Skip reads the next value and drops it.
func (r *Reader) Skip() error {
	_, err := r.s.dec.ReadValue()
	return r.fail(err)
}

// Pointer is the RFC 6901 pointer of the member being read.
func (r *Reader) Pointer() string { return r.s.pointer() }
