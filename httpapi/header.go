package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
)

// HeaderRequestID carries a request's id: accepted from the client when it is 1-128 of
// [A-Za-z0-9._:-], otherwise generated, and always echoed on the response and in the access log.
const HeaderRequestID = "X-Request-Id"

func requestID(r *http.Request) string {
	if v := r.Header.Get(HeaderRequestID); validRequestID(v) {
		return v
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func validRequestID(v string) bool {
	if len(v) == 0 || len(v) > 128 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}
