package cli_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/cli"
	"github.com/idemwork/idemwork/internal/faultproxy"
	"github.com/idemwork/idemwork/wire"
)

func TestACLIWriteWhoseCommitWasLostExits4WithCommitUnknown(t *testing.T) {
	t.Parallel()
	c := newKernelCLI(t)
	p := faultproxy.Start(t, c.db.DSN)
	run := func() (int, string) {
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		env := map[string]string{"XDG_CONFIG_HOME": t.TempDir()}
		code := cli.Run(ctx, []string{"--dsn", p.DSN(), "--allow-writes", "--json", "create", "--owner", "alice", "--module", "NOTE",
			"--key", "cli-lost", "--title", "t"}, &out, &errb, func(k string) string { return env[k] })
		return code, out.String()
	}
	p.Arm(faultproxy.AfterCommit)
	code, out := run()
	<-p.Fired()
	require.Equal(t, wire.ExitInternal, code, out)
	e := c.object(out)["error"].(map[string]any)
	require.Equal(t, "COMMIT_UNKNOWN", e["code"])
	require.EqualValues(t, 503, e["status"])
	require.Contains(t, e["message"], "retry with the same Idempotency-Key")

	code, out = run()
	require.Equal(t, wire.ExitOK, code, out)
	require.Equal(t, "REPLAYED", c.object(out)["outcome"], "the retry learns that the first write committed")
	require.Equal(t, 1, c.count(`SELECT count(*) FROM record`))
}
