package jsonb_test

import (
	"bytes"
	"context"
	stdjson "encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/jsonb"
)

// FuzzCanonical holds the rendering to PostgreSQL's: for every input jsonb accepts (and that has
// no duplicate name, which the boundary refuses), Canonical gives exactly jsonb's text, and that
// text is a fixed point; what jsonb refuses, Canonical refuses too.
func FuzzCanonical(f *testing.F) {
	for _, s := range corpus {
		f.Add(s)
	}
	db := testdb.New(f)
	conn, err := pgx.Connect(context.Background(), db.DSN)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = conn.Close(context.Background()) })
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := jsonb.Canonical([]byte(raw), jsonb.Limits{})
		if !utf8.ValidString(raw) || bytes.IndexByte([]byte(raw), 0) >= 0 {
			if err == nil {
				t.Fatalf("%q: accepted input PostgreSQL cannot even receive as text", raw)
			}
			return
		}
		want, ok := pgRender(t, conn, raw)
		if !ok {
			if err == nil {
				t.Fatalf("%q: PostgreSQL refuses it (%s) but Canonical gave %q", raw, want, got)
			}
			return
		}
		if err != nil {
			if je, isJE := err.(*jsonb.Error); isJE && je.Kind == jsonb.DuplicateName {
				return
			}
			t.Fatalf("%q: PostgreSQL prints %q, Canonical refuses: %v", raw, want, err)
		}
		if string(got) != want {
			t.Fatalf("%q: Canonical %q, PostgreSQL %q", raw, got, want)
		}
		if !jsonb.IsCanonical(got) {
			t.Fatalf("%q: canonical text %q is not a fixed point", raw, got)
		}
		if !stdjson.Valid(got) {
			t.Fatalf("%q: canonical text %q is not JSON", raw, got)
		}
	})
}
