package model

import "github.com/idemwork/idemwork/apperr"

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
