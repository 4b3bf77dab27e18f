package idemtype_test

import (
	"strings"
	"testing"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
)

// FuzzValidateKey: a key is accepted exactly when it is 1–255 bytes of 0x21–0x7E, and a refusal
// is a VALIDATION_FAILED about the key.
func FuzzValidateKey(f *testing.F) {
	for _, s := range []string{"", "k", "order-42", " ", "a b", "\x00", "\x7f", "~!", "é", strings.Repeat("k", 255), strings.Repeat("k", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		want := len(key) >= 1 && len(key) <= 255
		for i := 0; i < len(key); i++ {
			if key[i] < 0x21 || key[i] > 0x7e {
				want = false
			}
		}
		err := idemtype.ValidateKey(key)
		if (err == nil) != want {
			t.Fatalf("ValidateKey(%q) = %v, want accepted=%v", key, err, want)
		}
		if err != nil && (apperr.CodeOf(err) != apperr.ValidationFailed || !strings.HasPrefix(apperr.As(err).Message, "key: ")) {
			t.Fatalf("refusal is not a key VALIDATION_FAILED: %v", err)
		}
	})
}

// FuzzValidateOwner: an owner is accepted exactly when it is 1–128 of [A-Za-z0-9._:@-].
func FuzzValidateOwner(f *testing.F) {
	for _, s := range []string{"", "alice", "a.b_c:d@e-f", "a b", "a/b", "ä", "\x00", strings.Repeat("o", 128), strings.Repeat("o", 129)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, owner string) {
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:@-"
		want := len(owner) >= 1 && len(owner) <= 128
		for i := 0; i < len(owner); i++ {
			if strings.IndexByte(alphabet, owner[i]) < 0 {
				want = false
			}
		}
		err := idemtype.ValidateOwner(owner)
		if (err == nil) != want {
			t.Fatalf("ValidateOwner(%q) = %v, want accepted=%v", owner, err, want)
		}
		if err != nil && (apperr.CodeOf(err) != apperr.ValidationFailed || !strings.HasPrefix(apperr.As(err).Message, "owner: ")) {
			t.Fatalf("refusal is not an owner VALIDATION_FAILED: %v", err)
		}
	})
}
