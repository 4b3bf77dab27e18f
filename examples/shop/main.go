// Command shop is a small order service built on the idemwork runner library: POST /orders
// places an order at most once per owner and Idempotency-Key — the order row, its payment
// outbox message and the key's success commit in one transaction — and a retry gets the first
// answer back, restored from the order's own row. It is the reference service of the library's
// README; the idemwork workbench inspects its database and storms it (see README.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "shop:", err)
		os.Exit(1)
	}
}

func run() error {
	dsn := flag.String("dsn", os.Getenv("DATABASE_URL"), "PostgreSQL URL (default: DATABASE_URL)")
	addr := flag.String("addr", "127.0.0.1:8080", "listen on HOST:PORT")
	schema := flag.String("schema", "shop", "schema of the shop's tables and the runner's")
	flag.Parse()
	if *dsn == "" {
		return errors.New("--dsn is required (or DATABASE_URL)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	pool, err := pgxpool.New(ctx, *dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	shop, err := Open(ctx, pool, *schema)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: shop.Handler(), ReadHeaderTimeout: 10 * time.Second}
	log.Printf("shop: listening on http://%s (schema %s)", ln.Addr(), *schema)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
