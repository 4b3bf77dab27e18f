package idemtype

import "github.com/idemwork/idemwork/apperr"

// Limits of keys and owner ids (SPEC §9).
const (
	MaxKeyLen   = 255
	MaxOwnerLen = 128
)

// ValidateKey checks an Idempotency-Key: 1–255 visible ASCII characters (0x21–0x7E). A refusal
// is VALIDATION_FAILED, its message starting "key: ".
func ValidateKey(key string) error {
	if len(key) == 0 || len(key) > MaxKeyLen {
		return apperr.New(apperr.ValidationFailed, "key: must be 1-%d visible ASCII characters, got %d bytes", MaxKeyLen, len(key))
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7e {
			return apperr.New(apperr.ValidationFailed, "key: byte %d (0x%02x) is not visible ASCII (0x21-0x7E; no spaces)", i, c)
		}
	}
	return nil
}

// ValidateOwner checks an owner id: 1–128 of [A-Za-z0-9._:@-]. A refusal is VALIDATION_FAILED,
// its message starting "owner: ".
func ValidateOwner(owner string) error {
	if len(owner) == 0 || len(owner) > MaxOwnerLen {
		return apperr.New(apperr.ValidationFailed, "owner: must be 1-%d characters of A-Z a-z 0-9 . _ : @ -, got %d bytes", MaxOwnerLen, len(owner))
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
