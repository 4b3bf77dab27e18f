package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemwork/idemwork/store"
)

// Scratch is a database created for one bench run on the server of an admin DSN.
type Scratch struct {
	Name string
	// DSN reaches the scratch database (same server, user and options as the admin DSN).
	DSN      string
	adminDSN string
}

// CreateScratch creates an empty database with a name no one else uses (idemwork_bench_<pid>_<random>)
// through adminDSN, which may name any database the user can connect to. The caller drops it.
func CreateScratch(ctx context.Context, adminDSN string) (*Scratch, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := fmt.Sprintf("idemwork_bench_%d_%s", os.Getpid(), hex.EncodeToString(b[:]))
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", store.RedactDSN(adminDSN), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return nil, fmt.Errorf("create the scratch database %s (the user needs CREATEDB): %w", name, err)
	}
	return &Scratch{Name: name, DSN: WithDatabase(adminDSN, name), adminDSN: adminDSN}, nil
}

// Drop removes the scratch database, closing any session still in it. It runs even when ctx is
// already cancelled (an interrupted run still cleans up), bounded to 30 seconds.
func (s *Scratch) Drop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.adminDSN)
	if err != nil {
		return fmt.Errorf("drop the scratch database %s: %w", s.Name, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{s.Name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop the scratch database %s: %w", s.Name, err)
	}
	return nil
}

// WithDatabase returns dsn (a URL or key=value string) pointing at database name instead.
func WithDatabase(dsn, name string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + name
		u.RawPath = ""
		q := u.Query()
		if q.Has("dbname") {
			q.Set("dbname", name)
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	var parts []string
	for _, f := range strings.Fields(dsn) {
		if !strings.HasPrefix(f, "dbname=") {
			parts = append(parts, f)
		}
	}
	return strings.Join(append(parts, "dbname="+name), " ")
}
