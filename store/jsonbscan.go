package store

import (
	"encoding/json"

	"github.com/jackc/pgx/v5/pgtype"
)

// rawJSONBCodec is pgx's jsonb codec, except that a jsonb value read into a json.RawMessage is
// copied as the server sent it. pgx's own plan runs it through json.Unmarshal, which validates
// every byte of a document PostgreSQL has already parsed and stored as jsonb: for a record of
// 60 KB that is the largest share of a GET's CPU, twice (the record and its latest snapshot),
// and under one owner's read flood it is CPU every other owner waits behind (issue 28). The
// bytes kept are the same either way (RawMessage.UnmarshalJSON copies its input unchanged).
type rawJSONBCodec struct{ *pgtype.JSONBCodec }

func (c rawJSONBCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*json.RawMessage); ok && format == pgtype.TextFormatCode {
		return rawJSONBScan{}
	}
	return c.JSONBCodec.PlanScan(m, oid, format, target)
}

// rawJSONBScan copies a jsonb value in text format (the one pgx asks for) into a
// *json.RawMessage (NULL: nil).
type rawJSONBScan struct{}

func (p rawJSONBScan) Scan(src []byte, dst any) error {
	out := dst.(*json.RawMessage)
	if src == nil {
		*out = nil
		return nil
	}
	*out = append(make(json.RawMessage, 0, len(src)), src...)
	return nil
}

// registerRawJSONB makes m read jsonb into json.RawMessage with rawJSONBCodec.
func registerRawJSONB(m *pgtype.Map) {
	m.RegisterType(&pgtype.Type{Name: "jsonb", OID: pgtype.JSONBOID, Codec: rawJSONBCodec{&pgtype.JSONBCodec{Marshal: json.Marshal, Unmarshal: json.Unmarshal}}})
}
