package cli_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/storm/stormtypes"
	"github.com/idemwork/idemwork/verify"
	"github.com/idemwork/idemwork/wire"
)

// docs/errors.md is the public catalog of codes: every code a request can get is listed with
// the HTTP status it is served with and the exit code the CLI ends with, and nothing else is.
func TestTheErrorCatalogListsEveryCodeWithItsStatusAndExit(t *testing.T) {
	raw, err := os.ReadFile("../docs/errors.md")
	require.NoError(t, err)
	doc := string(raw)
	first, rest, ok := strings.Cut(doc, "\nCodes of a verdict")
	require.True(t, ok, "the page has its two tables")

	row := regexp.MustCompile("(?m)^\\| `([A-Z_]+)` \\| (\\d+) \\| (\\d+) \\|")
	listed := map[apperr.Code][2]int{}
	for _, m := range row.FindAllStringSubmatch(first, -1) {
		status, _ := strconv.Atoi(m[2])
		exit, _ := strconv.Atoi(m[3])
		_, dup := listed[apperr.Code(m[1])]
		require.False(t, dup, "%s is listed twice", m[1])
		listed[apperr.Code(m[1])] = [2]int{status, exit}
	}
	for _, c := range apperr.Codes() {
		got, ok := listed[c]
		require.True(t, ok, "docs/errors.md does not list %s", c)
		require.Equal(t, c.Status(), got[0], "%s: HTTP status", c)
		require.Equal(t, wire.ExitCode(c, c.Status()), got[1], "%s: exit code", c)
		delete(listed, c)
	}
	require.Empty(t, listed, "docs/errors.md lists codes apperr does not have")

	for _, c := range []apperr.Code{verify.CodeInvariantViolations, stormtypes.CodeDisagrees, stormtypes.CodeInjectedFault,
		stormtypes.CodeNoResponse, stormtypes.CodeCancelled, stormtypes.CodeHTTPError} {
		require.Contains(t, rest, "| `"+string(c)+"` |", "the verdict table lists %s", c)
	}
}
