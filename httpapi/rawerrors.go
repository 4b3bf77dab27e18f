package httpapi

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"strconv"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/wire"
)

// net/http answers a few requests itself, before any handler runs, in plain text: a request it
// cannot parse (400, e.g. a control character in a header value, 431 for headers over the limit,
// 501 for an unknown transfer encoding, 505) and an Expect other than 100-continue (417). It
// offers no hook for those bodies, so the listener's connections recognise exactly those writes
// — one Write each, with net/http's fixed text/plain headers and no Date, which every handler
// response carries — and send the same status with the JSON error object instead. Every 4xx of
// the server is then the JSON of SPEC §10.2.

const netHTTPErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

type jsonErrorsListener struct{ net.Listener }

func (l jsonErrorsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &jsonErrorsConn{Conn: c}, nil
}

type jsonErrorsConn struct{ net.Conn }

func (c *jsonErrorsConn) Write(p []byte) (int, error) {
	if out, ok := rewriteServerError(p); ok {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// CloseWrite keeps net/http's half-close after a 431 working through the wrapper.
func (c *jsonErrorsConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// rewriteServerError turns one of net/http's own error responses into the JSON error object.
func rewriteServerError(p []byte) ([]byte, bool) {
	const proto = "HTTP/1.1 "
	if len(p) < len(proto)+3 || string(p[:len(proto)]) != proto {
		return nil, false
	}
	status, err := strconv.Atoi(string(p[len(proto) : len(proto)+3]))
	if err != nil || status < 400 {
		return nil, false
	}
	var text string
	switch {
	case status == http.StatusExpectationFailed && !bytes.Contains(p, []byte("\r\nContent-Type:")):
		text = "only Expect: 100-continue is supported"
	case bytes.Contains(p, []byte(netHTTPErrorHeaders)) && !bytes.Contains(p, []byte("\r\nDate: ")):
		_, body, _ := bytes.Cut(p, []byte(netHTTPErrorHeaders))
		text = "the server could not read the request: " + string(body)
		if string(body) == strconv.Itoa(status)+" "+http.StatusText(status) {
			text = "the server could not read the request line or a header (a control character in a header value, for one)"
		}
	default:
		return nil, false
	}
	code := apperr.BadRequest
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		code = apperr.HeadersTooLarge
		text = "the request's headers exceed the server's limit"
	case http.StatusNotImplemented:
		code = apperr.NotImplemented
	case http.StatusHTTPVersionNotSupported:
		code = apperr.HTTPVersionNotSupported
	case http.StatusExpectationFailed:
		code = apperr.ExpectationFailed
	case http.StatusBadRequest:
	default:
		// A status net/http may add one day: still a catalogued code, with its own status.
		code = apperr.BadRequest
		if status >= 500 {
			code = apperr.NotImplemented
		}
	}
	body, _ := json.Marshal(wire.ErrorBody{Error: wire.ErrorDetail{Code: code, Status: status, Message: text}})
	body = append(body, '\n')
	var out bytes.Buffer
	out.WriteString(proto + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\n")
	out.WriteString("Content-Type: application/json; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n")
	out.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n")
	out.Write(body)
	return out.Bytes(), true
}
