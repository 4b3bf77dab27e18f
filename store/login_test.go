package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/store"
)

// A login the server or a pooler refuses is not "retry in a moment": a retry is refused again.
// pgbouncer reports its own authentication failure as 08P01, in the class of connection failures
// a retry does cure.
func TestARefusedLoginSaysToCheckTheCredentialsNotToRetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := testdb.NewDatabase(t)
	b := testdb.PgBouncer(t, store.PoolerTransaction)
	for route, dsn := range map[string]string{
		// The test cluster trusts its socket: a role that does not exist is its refusal (28000).
		"direct":    store.WithDSNParams(testdb.DSNOf(t, name), [][2]string{{"user", "no_such_role"}}),
		"pgbouncer": store.WithDSNParams(b.PoolerDSN(name), [][2]string{{"password", "not-the-password"}}),
	} {
		_, err := store.Open(ctx, dsn, store.Options{ReadOnly: true})
		require.Error(t, err, route)
		err = store.TranslateError(err)
		msg := apperr.As(err).Message
		require.NotEqual(t, apperr.DatabaseUnavailable, apperr.CodeOf(err), "%s: %s", route, msg)
		require.Regexp(t, "check the user and password|check the user in the URL", msg, route)
		require.NotContains(t, msg, "retry", route)
		require.NotContains(t, msg, "not-the-password", route)
	}
}
