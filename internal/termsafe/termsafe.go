// Package termsafe renders stored strings for a terminal. Titles, keys, operations, provider
// errors and queries come from HTTP clients, old databases or psql, and a terminal obeys what it
// is sent: ESC starts a control sequence (`\e[2J` clears the screen), a newline or tab moves the
// cursor out of the cell it was meant for, a bidi override reorders what follows, a lone
// combining mark fuses with the cell to its left. Every view and every text-mode command passes
// stored strings through this package, so none of those can change the screen outside its cell
// (SPEC §10.4): each such character is shown as a visible stand-in instead, one line per string.
package termsafe

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

// Ellipsis ends a cell that was cut.
const Ellipsis = "…"

// Line returns s as one terminal-safe line: C0 controls, DEL and ESC become their Unicode control
// pictures (ESC is ␛, newline ␊, tab ␉), C1 controls, format characters (bidi overrides, zero-width
// characters) and line/paragraph separators become `\u…` escapes, invalid UTF-8 bytes become
// `\x…`, and a combining mark with no base in s gets a dotted circle to sit on. Plain text comes
// back unchanged (and unallocated).
func Line(s string) string {
	if plain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	write(&b, s)
	return b.String()
}

// plain reports whether s needs no escaping: printable ASCII only (the common case, checked
// without decoding).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}

func write(b *strings.Builder, s string) {
	base := false // a rune a combining mark can attach to has been written
	for i := 0; i < len(s); {
		if c := s[i]; c >= 0x20 && c < 0x7f {
			j := i + 1
			for j < len(s) && s[j] >= 0x20 && s[j] < 0x7f {
				j++
			}
			b.WriteString(s[i:j])
			i, base = j, true
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
			i++
			base = true
			continue
		}
		i += n
		switch {
		case r < 0x20:
			b.WriteRune(0x2400 + r) // ␀ … ␟ (ESC is ␛)
		case r == 0x7f:
			b.WriteRune('␡')
		case invisible(r):
			b.WriteString(escapeRune(r))
		case unicode.Is(unicode.M, r) && !base:
			b.WriteRune('◌')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
		base = true
	}
}

// invisible reports the runes (beyond C0 and DEL) a terminal acts on or draws as nothing, or
// draws at a width it does not agree on with anyone: C1 controls, format characters (bidi
// overrides and isolates, zero-width space and joiner, BOM, soft hyphen), line and paragraph
// separators, surrogates, the replacement of a bad decode, and variation selectors (which switch
// a character between one and two cells in some terminals and not in others).
func invisible(r rune) bool {
	switch {
	case r >= 0x80 && r < 0xa0, r == utf8.RuneError:
		return true
	case r >= 0xfe00 && r <= 0xfe0f, r >= 0xe0100 && r <= 0xe01ef:
		return true
	}
	return unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Cs)
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&0xf]})
}

func escapeRune(r rune) string {
	if r > 0xffff {
		return `\U` + pad0(strconv.FormatInt(int64(r), 16), 8)
	}
	return `\u` + pad0(strconv.FormatInt(int64(r), 16), 4)
}

func pad0(s string, n int) string {
	if len(s) < n {
		return strings.Repeat("0", n-len(s)) + s
	}
	return s
}

// Cell returns s as a terminal-safe line of exactly w cells: cut with an ellipsis when longer,
// padded with spaces when shorter.
func Cell(s string, w int) string { return Pad(Line(s), w) }

// Fit returns s as a terminal-safe line of at most w cells (cut with an ellipsis).
func Fit(s string, w int) string { return Cut(Line(s), w) }

// Pad fits s, a line that is terminal-safe already (rendered, styles and all), into exactly w
// cells: cut with an ellipsis when longer, padded with spaces when shorter. Cell is Pad of a
// stored string.
func Pad(s string, w int) string {
	if w <= 0 {
		return ""
	}
	s = Cut(s, w)
	if n := ansi.StringWidth(s); n < w {
		s += strings.Repeat(" ", w-n)
	}
	return s
}

// Cut cuts s, a line that is terminal-safe already, to at most w cells, marking the cut with
// an ellipsis. Fit is Cut of a stored string.
func Cut(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) <= w {
		return s
	}
	return ansi.Truncate(s, w, Ellipsis)
}

// Quote returns s as a JSON string literal that is terminal-safe: JSON's own escapes for quotes,
// backslashes and C0 controls (`\u001b` for ESC, `\n`, `\t`), and `\u…` for DEL, C1 controls,
// format characters and separators, which JSON would pass through. Invalid UTF-8 shows as
// `\x…`, which no JSON encoder would have stored.
func Quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); {
		// Printable ASCII, by far the most of any text: as it is.
		if c := s[i]; c >= 0x20 && c < 0x7f && c != '"' && c != '\\' {
			j := i + 1
			for j < len(s) && s[j] >= 0x20 && s[j] < 0x7f && s[j] != '"' && s[j] != '\\' {
				j++
			}
			b.WriteString(s[i:j])
			i = j
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
			i++
			continue
		}
		i += n
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20, r == 0x7f, invisible(r):
			b.WriteString(escapeRune(r))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Safe reports whether s can be sent to a terminal as it is: Line would not change it.
func Safe(s string) bool { return Line(s) == s }

// Frame makes a whole rendered screen safe as a last line of defence: the styling the program
// itself adds (SGR sequences, `ESC [ … m`) and newlines pass; any other control — a sequence
// that moves the cursor, clears the screen or sets the clipboard, a C0 or C1 control, a format
// character — is shown as Line would show it. A view that forgot to pass a stored string
// through Line still cannot change the screen outside its cell (only colour it).
func Frame(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == 0x1b {
			if n := sgrLen(s[i:]); n > 0 {
				i += n - 1
				continue
			}
			clean = false
			break
		}
		if (c < 0x20 && c != '\n') || c == 0x7f || c >= 0x80 {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 32)
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == 0x1b:
			if n := sgrLen(s[i:]); n > 0 {
				b.WriteString(s[i : i+n])
				i += n
				continue
			}
			b.WriteRune('␛')
			i++
		case c == '\n':
			b.WriteByte('\n')
			i++
		case c < 0x80:
			if c < 0x20 {
				b.WriteRune(0x2400 + rune(c))
			} else if c == 0x7f {
				b.WriteRune('␡')
			} else {
				b.WriteByte(c)
			}
			i++
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n <= 1 {
				b.WriteString(`\x` + hex2(c))
				i++
				continue
			}
			if invisible(r) {
				b.WriteString(escapeRune(r))
			} else {
				b.WriteRune(r)
			}
			i += n
		}
	}
	return b.String()
}

// sgrLen is the length of the SGR sequence s starts with (ESC [ digits/;/: m), or 0.
func sgrLen(s string) int {
	if len(s) < 3 || s[0] != 0x1b || s[1] != '[' {
		return 0
	}
	for i := 2; i < len(s) && i < 64; i++ {
		switch c := s[i]; {
		case c == 'm':
			return i + 1
		case c >= '0' && c <= '9', c == ';', c == ':':
		default:
			return 0
		}
	}
	return 0
}

// CSVCell returns s as a cell of a CSV file someone will `cat` or open in a spreadsheet: one
// terminal-safe line (Line: no control byte leaves raw, so the file cannot move a terminal's
// cursor or split a row), and, per OWASP's CSV-injection advice, a cell a spreadsheet would read
// as a formula — one starting with =, +, -, @ (after any spaces; tab and carriage return are
// already stand-ins here) — is prefixed with a single quote, which makes it text. The CSV writer
// quotes the cell and doubles its quotes.
func CSVCell(s string) string {
	s = Line(s)
	if t := strings.TrimLeft(s, " "); t != "" && strings.ContainsRune("=+-@", rune(t[0])) {
		return "'" + s
	}
	return s
}
