package argvmask

import (
	"go/build"
	"os"
	"os/exec"
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
	parsed := Mask(argv)
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

// helperEnv makes this test binary print its own /proc/self/cmdline and exit (TestMain), as it
// stands once every package initializer ran and before main.
const helperEnv = "ARGVMASK_TEST_PRINT_CMDLINE"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		b, _ := os.ReadFile("/proc/self/cmdline")
		_, _ = os.Stdout.Write(b)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// By the time main runs, what ps reads is already blanked: the package's initializer did it, and
// Args still gives the command the values it was given.
func TestTheArgumentBlockIsBlankedBeforeMain(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "--token", "tok-init-5f1e9a", "--dsn=postgres://ann:pw-init-77c2@db/app", "-H", "Cookie: c-init-31")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.Output()
	require.NoError(t, err)
	shown := strings.ReplaceAll(string(out), "\x00", " ")
	require.Contains(t, shown, "--token xxxxxxxxxxxxxxx --dsn=postgres://ann:xxxxxxxxxxxx@db/app -H Cookie:xxxxxxxxxx")
}

// The package runs right after os's initializer only because it imports nothing else that has
// one: Go initializes packages in import-path order among those whose imports are done. An
// import of strings (which waits for unicode) or of anything bigger lets other initializers run
// first while the secrets are still on show.
func TestItImportsOnlyOsAndUnsafe(t *testing.T) {
	t.Parallel()
	p, err := build.ImportDir(".", 0)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"os", "unsafe"}, p.Imports)
}
