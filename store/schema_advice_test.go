package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/store"
)

// A session whose schema setting is missing, opened on a database whose tables live in another
// schema, is told where they are — not to migrate public, which would create a second, empty set.
func TestASessionWithoutItsSchemaSettingIsToldWhichSchemaHoldsTheTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := testdb.NewEmptyDatabase(t)
	mig := openVia(t, testdb.DSNOf(t, name), store.Options{AnySchema: true, Schema: "app"})
	_, err := mig.Migrate(ctx)
	require.NoError(t, err)

	for _, readOnly := range []bool{true, false} {
		_, err = store.Open(ctx, testdb.DSNOf(t, name), store.Options{ReadOnly: readOnly})
		msg := requireCode(t, err, apperr.SchemaNotReady)
		require.Contains(t, msg, `schema "public" has no idemwork tables, but schema "app" has them`)
		require.Contains(t, msg, `set [database] schema = "app"`)
		require.NotContains(t, msg, "run 'idemwork migrate")
	}
	db := openVia(t, testdb.DSNOf(t, name), store.Options{AnySchema: true, ReadOnly: true})
	st, err := db.ReadSchemaState(ctx)
	require.NoError(t, err)
	require.Equal(t, "public", st.Schema)
	require.Equal(t, []string{"app"}, st.Elsewhere)
	require.Zero(t, tableCount(t, name, "public"), "reading the state created nothing")

	// Where the tables are, nothing else is listed.
	db = openVia(t, testdb.DSNOf(t, name), store.Options{Schema: "app", ReadOnly: true})
	require.Empty(t, db.SchemaState().Elsewhere)
}

// Advice to run migrate that the session's role cannot follow (a support role without CREATE)
// says who can.
func TestAnUnmigratedDatabaseTellsARoleThatMayNotCreateTablesWhoMayMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := testdb.NewEmptyDatabase(t)
	role := testdb.NewRole(t, "support", name)
	asRole := store.WithDSNParams(testdb.DSNOf(t, name), [][2]string{{"user", role}})

	_, err := store.Open(ctx, asRole, store.Options{ReadOnly: true})
	msg := requireCode(t, err, apperr.SchemaNotReady)
	require.Contains(t, msg, "run 'idemwork migrate --allow-writes'")
	require.Contains(t, msg, `by a role that may create tables in schema public (role `+role+` may not: ask the database's owner)`)

	// The database's owner, who may create there, gets the plain advice.
	_, err = store.Open(ctx, testdb.DSNOf(t, name), store.Options{ReadOnly: true})
	msg = requireCode(t, err, apperr.SchemaNotReady)
	require.Contains(t, msg, "run 'idemwork migrate --allow-writes'")
	require.NotContains(t, msg, "may not")
}
