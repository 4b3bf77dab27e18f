package cli

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// heap returns s in writable memory, as the strings of os.Args are (a literal is read-only).
func heap(s string) string { return string([]byte(s)) }

func TestSecretsOnTheCommandLineAreHiddenInPlaceAndKeptForParsing(t *testing.T) {
	t.Parallel()
	argv := []string{heap("idemwork"),
		heap("--dsn"), heap("postgres://ann:s3cr%40t@db1:5432,db2:5432/app?sslmode=require"),
		heap("--dsn=host=db user=ann password=kv-secret dbname=app"),
		heap("storm"), heap("--token"), heap("tok-123456"), heap("--token=tok-inline"),
		heap("-H"), heap("Authorization: Bearer hdr-secret"), heap("--header"), heap("X-Trace: visible"),
		heap("create"), heap("--"), heap("--token"), heap("after-dashdash"),
	}
	parsed := hideSecretArgs(argv)
	require.Equal(t, "postgres://ann:s3cr%40t@db1:5432,db2:5432/app?sslmode=require", parsed[2], "the command parses the real values")
	require.Equal(t, "tok-123456", parsed[6])
	require.Equal(t, "--token=tok-inline", parsed[7])

	require.Equal(t, "postgres://ann:xxxxxxxx@db1:5432,db2:5432/app?sslmode=require", argv[2])
	require.Equal(t, "--dsn=host=db user=ann password=xxxxxxxxx dbname=app", argv[3])
	require.Equal(t, "xxxxxxxxxx", argv[6])
	require.Equal(t, "--token=xxxxxxxxxx", argv[7])
	require.Equal(t, "Authorization:xxxxxxxxxxxxxxxxxx", argv[9])
	require.Equal(t, "X-Trace: visible", argv[11])
	require.Equal(t, "after-dashdash", argv[15], "nothing after -- is a flag")
	all := strings.Join(argv, " ")
	for _, secret := range []string{"s3cr", "kv-secret", "tok-123456", "tok-inline", "hdr-secret"} {
		require.NotContains(t, all, secret)
	}
}
