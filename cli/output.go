package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/wire"
)

// usageError marks a command-line mistake (exit 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// isCobraUsage recognises cobra's own argument errors, which it does not type.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "required flag",
		"accepts ", "requires at least", "requires at most", "invalid argument", "flag needs an argument",
		"bad flag syntax", "if any flags in the group"} {
		if strings.HasPrefix(msg, p) || strings.Contains(msg, " "+p) {
			return true
		}
	}
	return false
}

// classify turns any error into its code, HTTP status, user message and exit code. Uncoded
// errors from setup (embedded cluster, config, connection) keep their message, which is written
// for users; any other uncoded error is INTERNAL with the step that failed and the SQLSTATE,
// never the driver's text (IDEMWORK_DEBUG=1 prints the cause).
func classify(err error) (apperr.Code, int, string, int) {
	var ce codedExit
	if errors.As(err, &ce) {
		return ce.Coded()
	}
	var ue *usageError
	var coded *apperr.Error
	if errors.As(err, &ue) || (!errors.As(err, &coded) && isCobraUsage(err)) {
		return apperr.Usage, http.StatusBadRequest, err.Error(), wire.ExitUsage
	}
	var ae *apperr.Error
	var se *setupError
	if !errors.As(err, &ae) && errors.As(err, &se) {
		return apperr.Internal, http.StatusInternalServerError, se.Error(), wire.ExitInternal
	}
	ae = wire.Coded(err)
	msg := ae.Message
	if msg == "" {
		msg = string(ae.Code)
	}
	return ae.Code, ae.Status(), msg, wire.ExitCode(ae.Code, ae.Status())
}

// codedExit is an error that decides its own code, status, message and exit code: a storm's
// verdict, whose exit follows the verdict rather than the code's usual status.
type codedExit interface {
	error
	Coded() (apperr.Code, int, string, int)
}

// setupError is a failure to reach or prepare the database; its message is meant for users.
type setupError struct{ err error }

func (e *setupError) Error() string { return e.err.Error() }
func (e *setupError) Unwrap() error { return e.err }

// reportedError is a failure whose JSON already went to stdout inside the command's own result
// (a storm whose verdict failed): printing another object would break "exactly one JSON object",
// so only the exit code and a line on stderr follow from it.
type reportedError struct{ err error }

func (e *reportedError) Error() string { return e.err.Error() }
func (e *reportedError) Unwrap() error { return e.err }

// printError writes err to stdout as JSON (when asJSON) or to stderr as text; it returns the
// exit code.
func printError(stdout, stderr io.Writer, asJSON bool, err error) int {
	code, status, msg, exit := classify(err)
	var reported *reportedError
	if errors.As(err, &reported) {
		asJSON = false
	}
	if asJSON {
		writeJSON(stdout, wire.ErrorBody{Error: wire.ErrorDetail{Code: code, Status: status, Message: msg}})
	} else {
		fmt.Fprintf(stderr, "idemwork: %s: %s\n", code, msg)
		if exit == wire.ExitUsage {
			fmt.Fprintln(stderr, "Run 'idemwork --help' for usage.")
		}
	}
	if os.Getenv("IDEMWORK_DEBUG") != "" {
		fmt.Fprintf(stderr, "debug: %+v\n", err)
	}
	return exit
}

// printBody prints a response's JSON body as every --json output is printed (indented): for a
// write, the very body `idemwork serve` sends for it.
func printBody(w io.Writer, r model.Response) {
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(r.Body), "", "  "); err != nil {
		_, _ = io.WriteString(w, r.Body)
		return
	}
	_, _ = w.Write(b.Bytes())
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
