package idemtype

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/jsonb"
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

// ParseEnvelope reads a stored envelope strictly: exactly schemaVersion, policy and result, with
// version 1; a raw-json-v1 document is returned as Legacy. Anything else is an integrity error.
func ParseEnvelope(raw []byte) (Envelope, error) {
	var version, policy, result []byte
	var unknown string
	r := jsonb.NewReader(raw)
	defer r.Close()
	err := r.Object(func(name []byte) error {
		v, err := r.RawView()
		switch string(name) {
		case "schemaVersion":
			version = v
		case "policy":
			policy = v
		case "result":
			result = v
		default:
			if unknown == "" {
				unknown = string(name)
			}
		}
		return err
	})
	if err != nil {
		return Envelope{}, apperr.New(apperr.SnapshotIntegrity, "stored envelope is not a JSON object: %v", err)
	}
	var env Envelope
	if policy != nil {
		if policy[0] != '"' {
			return Envelope{}, apperr.New(apperr.SnapshotIntegrity, "stored envelope policy is not a string")
		}
		if bytes.IndexByte(policy, '\\') < 0 {
			env.Policy = string(policy[1 : len(policy)-1])
		} else if err := json.Unmarshal(policy, &env.Policy); err != nil {
			return Envelope{}, apperr.New(apperr.SnapshotIntegrity, "stored envelope policy is not a string")
		}
	}
	if env.Policy == LegacyPolicy {
		return Envelope{Policy: LegacyPolicy, Result: json.RawMessage(raw), Legacy: true}, nil
	}
	if unknown != "" {
		return Envelope{}, apperr.New(apperr.SnapshotIntegrity, "stored envelope carries an unknown field %q", unknown)
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
	env.Result = result
	return env, nil
}
