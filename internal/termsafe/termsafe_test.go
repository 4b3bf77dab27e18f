package termsafe_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/termsafe"
)

func TestControlCharactersAreShownNotObeyed(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"\x1b[31mRED\x1b[0m \x1b[2J": "␛[31mRED␛[0m ␛[2J",
		"two\nlines\tand a tab":      "two␊lines␉and a tab",
		"bell\a nul\x00 del\x7f":     "bell␇ nul␀ del␡",
		"c1 \u0085 csi \u009b":       `c1 \u0085 csi \u009b`,
		"bidi \u202eevil":            `bidi \u202eevil`,
		"zero\u200bwidth":            `zero\u200bwidth`,
		"bad \xff byte":              `bad \xff byte`,
		"\u0301 lone mark":           "◌\u0301 lone mark",
		"é composed":                 "é composed",
		"e\u0301 decomposed":         "e\u0301 decomposed",
		"plain ASCII stays":          "plain ASCII stays",
		"wide 漢字 stays":              "wide 漢字 stays",
	}
	for in, want := range cases {
		require.Equal(t, want, termsafe.Line(in), "%q", in)
	}
}

func TestACellIsExactlyItsWidth(t *testing.T) {
	t.Parallel()
	require.Equal(t, "ab   ", termsafe.Cell("ab", 5))
	require.Equal(t, "abcd…", termsafe.Cell("abcdefgh", 5))
	require.Equal(t, "␛[2J ", termsafe.Cell("\x1b[2J", 5))
	require.Equal(t, "漢字…", termsafe.Cell("漢字漢字", 5))
	require.Equal(t, "", termsafe.Cell("x", 0))
}

func TestQuoteIsJSONAndTerminalSafe(t *testing.T) {
	t.Parallel()
	require.Equal(t, `"\u001b[2J\n\t\"q\" \\ \u202e \u0085 漢"`, termsafe.Quote("\x1b[2J\n\t\"q\" \\ \u202e \u0085 漢"))
	require.Equal(t, `"bad \xff"`, termsafe.Quote("bad \xff"))
}

// checkCell asserts what "no input may change the screen outside its cell" means for a cell of
// width w drawn between two bars: nothing a terminal acts on (no C0, DEL, C1, ESC, format
// character or bad UTF-8), nothing that fuses with the bar on its left, and exactly w cells, so
// the right bar lands where the layout put it.
func checkCell(t *testing.T, in, cell string, w int) {
	t.Helper()
	require.True(t, utf8.ValidString(cell), "input %q gave invalid UTF-8 %q", in, cell)
	for _, r := range cell {
		bad := r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Cs) ||
			(r >= 0xfe00 && r <= 0xfe0f) || r == utf8.RuneError
		require.False(t, bad, "input %q left %U in the cell %q", in, r, cell)
	}
	require.Equal(t, w, ansi.StringWidth(cell), "input %q: cell %q is not %d cells", in, cell, w)
	row := "|" + cell + "|"
	require.Equal(t, w+2, ansi.StringWidth(row), "input %q: the cell fused with its neighbours: %q", in, row)
	// The only sequences in the row are printable text: a parser finds no control sequence.
	state := byte(0)
	for rest := row; rest != ""; {
		seq, width, n, newState := ansi.DecodeSequence(rest, state, nil)
		require.False(t, width == 0 && n > 0 && seq != "" && !isMark(seq), "input %q: %q is a control sequence", in, seq)
		state, rest = newState, rest[n:]
	}
	require.NotContains(t, termsafe.Line(in), "\n")
}

func isMark(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.Is(unicode.M, r)
}

func TestHostileInputsStayInTheirCell(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"\x1b[31mRED\x1b[0m \x1b[2J", "a\nb\tc\r", "\x1b]52;c;aGk=\x07", "\x9b2J", "\u202e\u2066x\u2069",
		"\u0301\u0301", "漢\u0301", "👨\u200d👩\u200d👧", "☺\ufe0f", "\xff\xfe", strings.Repeat("漢", 30), "\u2028\u2029", "\x00"} {
		for _, w := range []int{1, 2, 3, 7, 20} {
			checkCell(t, in, termsafe.Cell(in, w), w)
		}
	}
}

func FuzzCell(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[2J", "a\nb", "\u202e", "\u0301x", "漢字", "\xff", "👨\u200d👩", "e\u0301\u0301"} {
		f.Add(s, 7)
	}
	f.Fuzz(func(t *testing.T, in string, w int) {
		if w < 1 || w > 300 {
			w = 1 + (w%300+300)%300
		}
		checkCell(t, in, termsafe.Cell(in, w), w)
		q := termsafe.Quote(in)
		for _, r := range q {
			require.False(t, r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp),
				"Quote(%q) left %U", in, r)
		}
	})
}

func TestAFrameKeepsItsStylingAndShowsEverythingElse(t *testing.T) {
	t.Parallel()
	styled := "\x1b[1;38;5;33mtitle\x1b[0m ok\nline two"
	require.Equal(t, styled, termsafe.Frame(styled))
	require.Equal(t, "\x1b[1mA\x1b[0m ␛[2J ␛]52;c;x␇ tab␉ \\u202e",
		termsafe.Frame("\x1b[1mA\x1b[0m \x1b[2J \x1b]52;c;x\a tab\t \u202e"))
}

func TestACSVCellIsOneSafeLineAndNeverAFormula(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                    "plain",
		"2026-01-02T03:04:05Z":     "2026-01-02T03:04:05Z",
		"=HYPERLINK(\"http://x\")": "'=HYPERLINK(\"http://x\")",
		"+1+2":                     "'+1+2",
		"-2+3":                     "'-2+3",
		"@SUM(A1)":                 "'@SUM(A1)",
		"  =1+1":                   "'  =1+1",
		"\t=1+1":                   "␉=1+1",
		"\r=1+1":                   "␍=1+1",
		"a\x1b]52;c;SGVsbG8=\x07b": "a␛]52;c;SGVsbG8=␇b",
		"two\nlines":               "two␊lines",
		"\x1b[2J=cmd":              "␛[2J=cmd",
		"key-with-dash-inside":     "key-with-dash-inside",
		"\u202eevil":               `\u202eevil`,
	} {
		got := termsafe.CSVCell(in)
		if got != want {
			t.Errorf("CSVCell(%q) = %q, want %q", in, got, want)
		}
		for _, r := range got {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
				t.Errorf("CSVCell(%q) holds control %U", in, r)
			}
		}
	}
}
