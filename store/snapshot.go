package store

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/idemwork/idemwork/jsonb"
	"github.com/idemwork/idemwork/model"
)

// AppendSnapshot appends the revision snapshot of r to dst: the JSON value json.Marshal(r)
// writes, which is all a jsonb column keeps of it, written without reflection (a revision is
// written on every create, patch and feature run). What it would not write as json.Marshal does —
// a string that is not valid UTF-8 (json.Marshal replaces the bytes), a payload that is not JSON,
// a time RFC 3339 cannot hold (json.Marshal refuses both) — goes through json.Marshal.
func AppendSnapshot(dst []byte, r model.Record) ([]byte, error) {
	start := len(dst)
	if plainSnapshot(r) {
		dst = append(dst, `{"id":`...)
		dst = jsonb.AppendString(dst, r.ID)
		dst = append(dst, `,"ownerId":`...)
		dst = jsonb.AppendString(dst, r.OwnerID)
		dst = append(dst, `,"moduleCode":`...)
		dst = jsonb.AppendString(dst, r.ModuleCode)
		dst = append(dst, `,"revision":`...)
		dst = strconv.AppendInt(dst, int64(r.Revision), 10)
		dst = append(dst, `,"title":`...)
		dst = jsonb.AppendString(dst, r.Title)
		dst = append(dst, `,"summary":`...)
		dst = jsonb.AppendString(dst, r.Summary)
		dst = append(dst, `,"payload":`...)
		if r.Payload == nil {
			dst = append(dst, "null"...)
		} else {
			dst = append(dst, r.Payload...)
		}
		var ok bool
		dst = append(dst, `,"createdAt":`...)
		if dst, ok = appendRFC3339(dst, r.CreatedAt); ok {
			dst = append(dst, `,"updatedAt":`...)
			if dst, ok = appendRFC3339(dst, r.UpdatedAt); ok {
				return append(dst, '}'), nil
			}
		}
	}
	b, err := json.Marshal(r)
	return append(dst[:start], b...), err
}

// plainSnapshot reports whether r's texts are valid UTF-8 and its payload JSON (or absent).
func plainSnapshot(r model.Record) bool {
	return utf8.ValidString(r.ID) && utf8.ValidString(r.OwnerID) && utf8.ValidString(r.ModuleCode) &&
		utf8.ValidString(r.Title) && utf8.ValidString(r.Summary) && (r.Payload == nil || json.Valid(r.Payload))
}

// appendRFC3339 appends t quoted as time.Time's MarshalJSON writes it (RFC 3339 with nanoseconds),
// reporting false where MarshalJSON fails: a year of other than four digits, a zone hour past 23.
func appendRFC3339(dst []byte, t time.Time) ([]byte, bool) {
	dst = append(dst, '"')
	n0 := len(dst)
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	if len(dst)-n0 < len("2006-01-02T15:04:05Z") || dst[n0+len("9999")] != '-' {
		return dst, false
	}
	if dst[len(dst)-1] != 'Z' {
		c := dst[len(dst)-len("Z07:00")]
		hh := dst[len(dst)-len("07:00"):]
		if ('0' <= c && c <= '9') || 10*(hh[0]-'0')+(hh[1]-'0') >= 24 {
			return dst, false
		}
	}
	return append(dst, '"'), true
}
