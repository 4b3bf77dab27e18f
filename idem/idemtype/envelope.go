package idemtype

import (
	"bytes"
	"encoding/json"
	"errors"
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

// envelopeMembers are a stored envelope's members as written, read through json v2's decoder (a
// duplicate name and invalid UTF-8 are errors): each known member's value as a slice of the
// stored bytes (no copy), and the first member no field names (unknown, for the verdict).
type envelopeMembers struct {
	raw                           []byte
	SchemaVersion, Policy, Result []byte
	unknown                       string
	hasUnknown                    bool
}

var errEnvelopeNotObject = errors.New("not a JSON object")

// UnmarshalJSONFrom is json v2's hook: dec reads m.raw, the whole envelope.
func (m *envelopeMembers) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		if err == nil {
			err = errEnvelopeNotObject
		}
		return err
	}
	for dec.PeekKind() == '"' {
		quoted, err := dec.ReadValue()
		if err != nil {
			return err
		}
		name := quoted[1 : len(quoted)-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			if name, err = jsontext.AppendUnquote(nil, quoted); err != nil {
				return err
			}
		}
		var slot *[]byte
		switch string(name) { // no copy
		case "schemaVersion":
			slot = &m.SchemaVersion
		case "policy":
			slot = &m.Policy
		case "result":
			slot = &m.Result
		default:
			if !m.hasUnknown {
				m.unknown, m.hasUnknown = string(name), true // before the decoder reads on
			}
		}
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		if slot != nil {
			end := int(dec.InputOffset()) // the value's bytes in raw: they stay after the next read
			*slot = m.raw[end-len(v) : end : end]
		}
	}
	_, err := dec.ReadToken()
	return err
}

// ParseEnvelope reads a stored envelope strictly: exactly schemaVersion, policy and result, with
// version 1; a raw-json-v1 document is returned as Legacy. Anything else is an integrity error.
func ParseEnvelope(raw []byte) (Envelope, error) {
	m := envelopeMembers{raw: raw}
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
	if m.hasUnknown {
		return Envelope{}, apperr.New(apperr.SnapshotIntegrity, "stored envelope carries an unknown field %q", m.unknown)
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
