// Command driver runs the exactly-once-across-failover scenario (package failover) against
// `idemwork serve` processes someone else started, injecting faults given as shell commands:
// the load of scripts/failover-scenario.sh, which sets up the database and the servers and
// names the faults. It prints the report as one JSON object and exits 0 when exactly-once held,
// 1 when it did not, 2 when it could not run.
//
//	go run ./internal/failover/driver --url http://127.0.0.1:7621 --url http://127.0.0.1:7622 \
//	    --dsn "$DSN" --idemwork bin/idemwork --fault 'failover:pg_autoctl perform failover=…'
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/idemwork/idemwork/internal/failover"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	var urls, faults list
	var opts failover.Options
	var idemwork string
	flag.Var(&urls, "url", "an idemwork serve (run with --dev-auth) to send to; repeat it")
	flag.Var(&faults, "fault", "a fault: [failover:]NAME=SHELL COMMAND, run while the load goes on; it must return once the database accepts writes again (repeat it; in order)")
	flag.StringVar(&opts.DSN, "dsn", "", "the database (to read what it holds of the keys)")
	flag.StringVar(&idemwork, "idemwork", "bin/idemwork", "the idemwork binary, for verify --all")
	flag.IntVar(&opts.Clients, "clients", 8, "clients sending at once")
	flag.IntVar(&opts.Rate, "rate", 0, "keys per second, all clients together (0: as fast as they can)")
	flag.IntVar(&opts.Between, "between", 300, "keys acknowledged before, between and after the faults")
	flag.Parse()
	opts.URLs = urls
	for _, f := range faults {
		name, cmd, ok := strings.Cut(f, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "driver: --fault %q: want [failover:]NAME=COMMAND\n", f)
			os.Exit(2)
		}
		name, moves := strings.CutPrefix(name, "failover:")
		opts.Faults = append(opts.Faults, failover.Fault{Name: name, Failover: moves, Inject: func(ctx context.Context) error {
			c := exec.CommandContext(ctx, "bash", "-c", cmd)
			c.Stdout, c.Stderr = os.Stderr, os.Stderr
			return c.Run()
		}})
	}
	opts.Verify = func(ctx context.Context) (int64, error) {
		var out bytes.Buffer
		c := exec.CommandContext(ctx, idemwork, "--dsn", opts.DSN, "--json", "verify", "--all")
		c.Stdout, c.Stderr = &out, os.Stderr
		_ = c.Run() // exit 4 with violations: the report says how many
		var rep struct {
			Violations *int64 `json:"violations"`
		}
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Violations == nil {
			return 0, fmt.Errorf("verify --all printed %q", out.String())
		}
		return *rep.Violations, nil
	}
	opts.Progress = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	rep, err := failover.Run(ctx, opts)
	js, _ := json.Marshal(rep)
	fmt.Println(string(js))
	if err != nil {
		fmt.Fprintf(os.Stderr, "driver: %v\n", err)
		os.Exit(2)
	}
	if !rep.OK() {
		os.Exit(1)
	}
}
