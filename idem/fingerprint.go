package idem

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/idemwork/idemwork/apperr"
)

// Fingerprints carry their version. Version 2, written by this runner, is "v2:" and the SHA-256
// hex of a length-prefixed tuple: the tag fingerprintV2Tag, the operation and the request body in
// its canonical form (jsonb text, see package jsonb), each as an 8-byte big-endian length and
// its bytes, so no choice of operation and body can collide with another one. A fingerprint
// without a prefix is version 1 (64 hex digits: what this runner wrote before), compared by
// version 1's rule; any other version fails closed.
const (
	fingerprintV2Prefix = "v2:"
	fingerprintV2Tag    = "idemwork.fingerprint.v2"
)

// Fingerprint is the version 2 fingerprint of a request: operation and canonical body. Callers
// pass the body in its canonical form (the kernel builds it from the decoded fields); bytes that
// are not canonical still fingerprint deterministically, only less forgivingly (two spellings of
// one value then count as different requests, never the other way round).
func Fingerprint(operation string, canonicalBody []byte) string {
	h := sha256.New()
	var n [8]byte
	for _, part := range [...][]byte{[]byte(fingerprintV2Tag), []byte(operation), canonicalBody} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	var sum [sha256.Size]byte
	out := make([]byte, len(fingerprintV2Prefix), len(fingerprintV2Prefix)+2*sha256.Size)
	copy(out, fingerprintV2Prefix)
	return string(hex.AppendEncode(out, h.Sum(sum[:0])))
}

// FingerprintVersion names the version of a stored fingerprint: 1, 2, or 0 when this runner does
// not know it.
func FingerprintVersion(stored string) int {
	switch {
	case strings.HasPrefix(stored, fingerprintV2Prefix):
		return 2
	case len(stored) == 2*sha256.Size && strings.Trim(stored, "0123456789abcdef") == "":
		return 1
	}
	return 0
}

// sameRequest compares a stored fingerprint with a request by the rule of the stored version.
// fp is the request's version 2 fingerprint.
func sameRequest(stored string, req Request, fp string) (bool, error) {
	switch FingerprintVersion(stored) {
	case 2:
		return stored == fp || req.EarlierBody != nil && stored == Fingerprint(req.Operation, req.EarlierBody), nil
	case 1:
		body := req.Body
		if req.BodyV1 != nil {
			b, err := req.BodyV1()
			if err != nil {
				return false, err
			}
			body = b
		}
		v1, err := FingerprintV1(req.Operation, body)
		if err != nil {
			return false, nil // a body version 1 could not read is not the request it stored
		}
		return stored == v1, nil
	}
	return false, apperr.New(apperr.PolicyMismatch, "key %q holds a fingerprint of a version this idemwork does not know (%.12s…); refusing to guess whether the request is the same", req.Key, stored)
}

// FingerprintV1 is version 1's rule, kept as it was for the rows it wrote: the SHA-256 hex of
// encoding/json's rendering of {"body": <body decoded with numbers as written, keys sorted>,
// "operation": operation}, HTML escaping off; an empty body counts as null.
func FingerprintV1(operation string, body []byte) (string, error) {
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
