package idemtype

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/idemwork/idemwork/apperr"
)

// SchemaVersion is the only envelope version this runner writes.
const SchemaVersion = 1

// LegacyPolicy names pre-envelope receipts: readable for display, never written, never restored.
const LegacyPolicy = "raw-json-v1"

// Envelope is idempotency_record.response.
type Envelope struct {
	SchemaVersion int             `json:"schemaVersion"`
	Policy        string          `json:"policy"`
	Result        json.RawMessage `json:"result"`
	// Legacy marks a raw-json-v1 receipt; its Result is the whole stored document.
	Legacy bool `json:"-"`
}

// envelopeMembers are a stored envelope's members as written: json v2 refuses a duplicate name
// and invalid UTF-8, and keeps the members no field names (Unknown) for the verdict.
type envelopeMembers struct {
	SchemaVersion jsontext.Value `json:"schemaVersion"`
	Policy        jsontext.Value `json:"policy"`
	Result        jsontext.Value `json:"result"`
	Unknown       jsontext.Value `json:",embed"` // the members no other field names
}

// ParseEnvelope reads a stored envelope strictly: exactly schemaVersion, policy and result, with
// version 1; a raw-json-v1 document is returned as Legacy. Anything else is an integrity error.
func ParseEnvelope(raw []byte) (Envelope, error) {
	var m envelopeMembers
	if i := bytes.IndexFunc(raw, func(r rune) bool { return !unicode.IsSpace(r) }); i < 0 || raw[i] != '{' {
		return Envelope{}, apperr.New(apperr.SnapshotIntegrity, "stored envelope is not a JSON object")
	}
	if err := jsonv2.Unmarshal(raw, &m); err != nil {
		return Envelope{}, apperr.New(apperr.SnapshotIntegrity, "stored envelope is not a JSON object: %v", err)
	}
	version, policy, result := m.SchemaVersion, m.Policy, m.Result
	var env Envelope
	if policy != nil {
		if policy[0] != '"' {
			return Envelope{}, apperr.New(apperr.SnapshotIntegrity, "stored envelope policy is not a string")
		}
		env.Policy = string(policy[1 : len(policy)-1])
		if bytes.IndexByte(policy, '\\') >= 0 {
			u, _ := jsontext.AppendUnquote(nil, policy) // json v2 has checked the string
			env.Policy = string(u)
		}
	}
	if env.Policy == LegacyPolicy {
		return Envelope{Policy: LegacyPolicy, Result: json.RawMessage(raw), Legacy: true}, nil
	}
	if m.Unknown != nil {
		dec := jsontext.NewDecoder(bytes.NewReader(m.Unknown))
		_, _ = dec.ReadToken() // {
		name, _ := dec.ReadToken()
		return Envelope{}, apperr.New(apperr.SnapshotIntegrity, "stored envelope carries an unknown field %q", name.String())
	}
	if version != nil {
		n, err := strconv.Atoi(string(version))
		if err != nil {
			return Envelope{}, apperr.New(apperr.SnapshotIntegrity, "stored envelope is malformed: schemaVersion %.20s is not an integer", version)
		}
		env.SchemaVersion = n
	}
	if env.SchemaVersion != SchemaVersion {
		return Envelope{}, apperr.New(apperr.SnapshotIntegrity, "stored envelope has schemaVersion %d; this runner reads %d", env.SchemaVersion, SchemaVersion)
	}
	if env.Policy == "" || len(result) == 0 {
		return Envelope{}, apperr.New(apperr.SnapshotIntegrity, "stored envelope lacks policy or result")
	}
	env.Result = json.RawMessage(result)
	return env, nil
}
