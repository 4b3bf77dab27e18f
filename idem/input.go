package idem

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"idemwork/apperr"
)

const (
	maxKeyLen   = 255
	maxOwnerLen = 128
)

// ValidateKey checks an Idempotency-Key: 1–255 visible ASCII characters (0x21–0x7E).
func ValidateKey(key string) error {
	if len(key) == 0 || len(key) > maxKeyLen {
		return apperr.New(apperr.ValidationFailed, "key: must be 1-%d visible ASCII characters, got %d bytes", maxKeyLen, len(key))
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7e {
			return apperr.New(apperr.ValidationFailed, "key: byte %d (0x%02x) is not visible ASCII (0x21-0x7E; no spaces)", i, c)
		}
	}
	return nil
}

// ValidateOwner checks an owner id: 1–128 of [A-Za-z0-9._:@-].
func ValidateOwner(owner string) error {
	if len(owner) == 0 || len(owner) > maxOwnerLen {
		return apperr.New(apperr.ValidationFailed, "owner: must be 1-%d characters of A-Z a-z 0-9 . _ : @ -, got %d bytes", maxOwnerLen, len(owner))
	}
	for i := 0; i < len(owner); i++ {
		c := owner[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == ':' || c == '@' || c == '-'
		if !ok {
			return apperr.New(apperr.ValidationFailed, "owner: character %q at byte %d is not allowed (A-Z a-z 0-9 . _ : @ -)", rune(c), i)
		}
	}
	return nil
}

// Fingerprint is the SHA-256 hex of the canonical JSON of {"operation", "body"}: object keys
// sorted, no insignificant whitespace, numbers kept as written. Two bodies that differ only in
// key order or spacing have the same fingerprint. An empty body counts as null.
func Fingerprint(operation string, body []byte) (string, error) {
	if fp, ok := fastFingerprint(operation, body); ok {
		return fp, nil
	}
	return fingerprintJSON(operation, body)
}

// fingerprintJSON is Fingerprint by decoding the body and encoding it again: the reference, used
// for every body fastFingerprint does not handle.
func fingerprintJSON(operation string, body []byte) (string, error) {
	var parsed any
	if len(bytes.TrimSpace(body)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&parsed); err != nil {
			return "", apperr.Wrap(apperr.ValidationFailed, err, "body: not valid JSON: %v", err)
		}
		if dec.More() {
			return "", apperr.New(apperr.ValidationFailed, "body: more than one JSON value")
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]any{"operation": operation, "body": parsed}); err != nil {
		return "", fmt.Errorf("fingerprint: %w", err)
	}
	sum := sha256.Sum256(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	return hex.EncodeToString(sum[:]), nil
}
