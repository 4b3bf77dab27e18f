package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/config"
)

func env(m map[string]string) config.Getenv { return func(k string) string { return m[k] } }

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.toml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestDefaultsWithoutAFile(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load("", env(map[string]string{"XDG_CONFIG_HOME": t.TempDir()}))
	require.NoError(t, err)
	require.Equal(t, 24*time.Hour, cfg.Idempotency.TTL.Duration)
	require.Equal(t, 2000, cfg.Modules.MEM001.MaxContentLength)
	require.Equal(t, "127.0.0.1:8787", cfg.HTTP.Addr)
}

func TestTheExampleConfigIsValidAndComplete(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load("../config.example.toml", env(nil))
	require.NoError(t, err)
	require.Equal(t, config.Default().Idempotency, cfg.Idempotency)
	require.Equal(t, config.Default().Outbox, cfg.Outbox)
}

func TestTheReaperAndOutboxKeysHaveSafeDefaultsAndBounds(t *testing.T) {
	t.Parallel()
	d := config.Default()
	require.Equal(t, 5*time.Minute, d.Idempotency.ReapInterval.Duration)
	require.Less(t, d.Outbox.CallTimeout.Duration, d.Outbox.Lease.Duration)
	cfg, err := config.Load(write(t, "[idempotency]\nreap_interval = \"0\"\n"), env(nil))
	require.NoError(t, err, "0 disables the reaper")
	require.Zero(t, cfg.Idempotency.ReapInterval.Duration)
	_, err = config.Load(write(t, "[idempotency]\nreap_interval = \"-1m\"\n"), env(nil))
	require.ErrorContains(t, err, "idempotency.reap_interval")
	_, err = config.Load(write(t, "[outbox]\nlease = \"5s\"\ncall_timeout = \"5s\"\n"), env(nil))
	require.ErrorContains(t, err, "outbox.call_timeout must be at least 10ms and below outbox.lease")
	_, err = config.Load(write(t, "[outbox]\nbase_backoff = \"1m\"\nmax_backoff = \"30s\"\n"), env(nil))
	require.ErrorContains(t, err, "outbox.max_backoff")
	cfg, err = config.Load(write(t, "[outbox]\nlease = \"2m\"\ncall_timeout = \"90s\"\nmax_backoff = \"1h\"\n"), env(nil))
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, cfg.Outbox.CallTimeout.Duration)
}

// Issue 28: every duration has a floor and a ceiling; a value outside is refused naming the key
// (the CLI makes it USAGE), and config.example.toml says both in the comment above the key.
func TestEveryDurationHasAFloorAndACeiling(t *testing.T) {
	t.Parallel()
	example, err := os.ReadFile("../config.example.toml")
	require.NoError(t, err)
	for _, c := range []struct {
		section, key      string
		floor, ceiling    string
		below, above      string
		extra             string // other keys the value needs to be valid at all
		docFloor, docCeil string // how the example's comment names them
	}{
		{"idempotency", "ttl", "1s", "720h", "999ms", "721h", "", `"1s"`, `"720h"`},
		{"idempotency", "acquire_timeout", "10ms", "5m", "9ms", "5m1s", "", `"10ms"`, `"5m"`},
		{"idempotency", "reap_interval", "1s", "24h", "1ns", "24h1s", "", `"1s"`, `"24h"`},
		{"outbox", "base_backoff", "10ms", "24h", "1ms", "24h1s", "max_backoff = \"24h\"\n", `"10ms"`, `"24h"`},
		{"outbox", "max_backoff", "500ms", "24h", "499ms", "25h", "", "between base_backoff", `"24h"`},
		{"outbox", "lease", "1s", "1h", "999ms", "1h1s", "call_timeout = \"500ms\"\n", `"1s"`, `"1h"`},
		{"outbox", "call_timeout", "10ms", "29.999s", "9ms", "30s", "", `"10ms"`, "below the lease"},
	} {
		cfg := func(v string) string { return "[" + c.section + "]\n" + c.extra + c.key + " = \"" + v + "\"\n" }
		for _, ok := range []string{c.floor, c.ceiling} {
			_, err := config.Load(write(t, cfg(ok)), env(nil))
			require.NoError(t, err, "%s.%s = %s", c.section, c.key, ok)
		}
		for _, bad := range []string{c.below, c.above} {
			_, err := config.Load(write(t, cfg(bad)), env(nil))
			require.ErrorContains(t, err, c.section+"."+c.key+" must be", "%s.%s = %s is refused", c.section, c.key, bad)
		}
		comment := commentAbove(t, string(example), c.key)
		require.Contains(t, comment, c.docFloor, "config.example.toml gives %s's floor", c.key)
		require.Contains(t, comment, c.docCeil, "config.example.toml gives %s's ceiling", c.key)
	}
	_, err = config.Load(write(t, "[outbox]\nconcurrency = 0\n"), env(nil))
	require.ErrorContains(t, err, "outbox.concurrency must be 1 to 64")
}

// commentAbove is the block of comment lines (and keys documented together with key) right
// above the line that sets key in a TOML file.
func commentAbove(t *testing.T, file, key string) string {
	t.Helper()
	lines := strings.Split(file, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, key+" = ") {
			continue
		}
		var b strings.Builder
		for j := i - 1; j >= 0 && lines[j] != "" && !strings.HasPrefix(lines[j], "["); j-- {
			b.WriteString(lines[j] + "\n")
		}
		return strings.Join(strings.Fields(b.String()), " ")
	}
	t.Fatalf("config.example.toml does not set %s", key)
	return ""
}

func TestAnUnknownKeyIsAnErrorNamingIt(t *testing.T) {
	t.Parallel()
	_, err := config.Load(write(t, "[database]\nurll = \"x\"\n"), env(nil))
	require.Error(t, err)
	require.Contains(t, err.Error(), "database.urll")
	require.Contains(t, err.Error(), "line 2")
}

func TestABadValueNamesItsKey(t *testing.T) {
	t.Parallel()
	_, err := config.Load(write(t, "[idempotency]\nttl = \"soon\"\n"), env(nil))
	require.ErrorContains(t, err, "idempotency.ttl")
	_, err = config.Load(write(t, "[modules.MEM-001]\nmax_content_length = 0\n"), env(nil))
	require.ErrorContains(t, err, "modules.MEM-001.max_content_length")
	_, err = config.Load(write(t, "[database]\ntcp_port = \"x\"\n"), env(nil))
	require.ErrorContains(t, err, "database.tcp_port")
}

func TestAnExplicitMissingFileIsAnError(t *testing.T) {
	t.Parallel()
	_, err := config.Load(filepath.Join(t.TempDir(), "nope.toml"), env(nil))
	require.Error(t, err)
}

func TestEnvironmentOverridesTheFileInSpecOrder(t *testing.T) {
	t.Parallel()
	p := write(t, "[database]\nurl = \"postgres://file/db\"\n")
	cfg, err := config.Load(p, env(map[string]string{"DATABASE_URL": "postgres://dburl/db"}))
	require.NoError(t, err)
	require.Equal(t, "postgres://dburl/db", cfg.Database.URL)
	cfg, err = config.Load(p, env(map[string]string{"DATABASE_URL": "postgres://dburl/db", "IDEMWORK_DSN": "postgres://idem/db"}))
	require.NoError(t, err)
	require.Equal(t, "postgres://idem/db", cfg.Database.URL)
	_, err = config.Load(p, env(map[string]string{"IDEMWORK_ALLOW_WRITES": "maybe"}))
	require.ErrorContains(t, err, "IDEMWORK_ALLOW_WRITES")
}

func FuzzDecode(f *testing.F) {
	b, _ := os.ReadFile("../config.example.toml")
	f.Add(string(b))
	f.Add("[database]\nurl = 1\n")
	f.Add("[[x]]\n")
	f.Fuzz(func(t *testing.T, doc string) {
		cfg := config.Default()
		if err := config.Decode([]byte(doc), &cfg); err == nil {
			_ = cfg.Validate() // must not panic on anything that decodes
		}
	})
}

// Observation 6: a TTL of 1ns let one key execute 19 times in one storm; the TTL has bounds.
func TestTheTTLAndTheOverloadKnobsHaveBounds(t *testing.T) {
	t.Parallel()
	for body, ok := range map[string]bool{
		"[idempotency]\nttl = \"1ns\"\n":               false,
		"[idempotency]\nttl = \"999ms\"\n":             false,
		"[idempotency]\nttl = \"1s\"\n":                true,
		"[idempotency]\nttl = \"720h\"\n":              true,
		"[idempotency]\nttl = \"721h\"\n":              false,
		"[idempotency]\nacquire_timeout = \"5ms\"\n":   false,
		"[idempotency]\nacquire_timeout = \"250ms\"\n": true,
		"[idempotency]\nowner_max_conns = -1\n":        false,
		"[idempotency]\nowner_max_conns = 0\n":         true,
		"[idempotency]\nkey_max_conns = 0\n":           false,
		"[idempotency]\nkey_max_conns = 1\n":           true,
		"[http]\nrequire_key = true\n":                 true,
	} {
		cfg, err := config.Load(write(t, body), env(nil))
		if ok {
			require.NoError(t, err, body)
			continue
		}
		require.Error(t, err, body)
		require.Contains(t, err.Error(), "idempotency.", body)
		_ = cfg
	}
	cfg, err := config.Load(write(t, "[http]\nrequire_key = true\n"), env(nil))
	require.NoError(t, err)
	require.True(t, cfg.HTTP.RequireKey)
}

func TestThePoolerAndSchemaKeysAreCheckedAndReadFromTheEnvironment(t *testing.T) {
	t.Parallel()
	_, err := config.Load(write(t, "[database]\npooler = \"statement\"\n"), env(nil))
	require.ErrorContains(t, err, `database.pooler must be "none", "session" or "transaction"`)
	cfg, err := config.Load(write(t, "[database]\npooler = \"transaction\"\nschema = \"idemwork\"\n"), env(nil))
	require.NoError(t, err)
	require.Equal(t, "transaction", cfg.Database.Pooler)
	require.Equal(t, "idemwork", cfg.Database.Schema)
	cfg, err = config.Load(write(t, "[database]\npooler = \"transaction\"\n"), env(map[string]string{"IDEMWORK_POOLER": "session", "IDEMWORK_SCHEMA": "s"}))
	require.NoError(t, err)
	require.Equal(t, "session", cfg.Database.Pooler)
	require.Equal(t, "s", cfg.Database.Schema)
}

// Issue 28: a config file holding bearer tokens or a database password that other users can
// read is refused, naming chmod 600, unless the caller allows it (--allow-insecure-config).
func TestAConfigHoldingSecretsThatOthersCanReadIsRefused(t *testing.T) {
	t.Parallel()
	withMode := func(body string, mode os.FileMode) string {
		p := write(t, body)
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	tokens := "[http.tokens]\n\"token-of-ann-1\" = \"ann\"\n"
	password := "[database]\nurl = \"postgres://ann:hunter2@db.internal/app\"\n"
	kv := "[database]\nurl = \"host=db user=ann password=hunter2\"\n"
	for _, body := range []string{tokens, password, kv} {
		for _, mode := range []os.FileMode{0o644, 0o640, 0o604} {
			p := withMode(body, mode)
			_, err := config.Load(p, env(nil))
			require.Error(t, err, "%04o %q", mode, body)
			require.Contains(t, err.Error(), "chmod 600 "+p)
			require.Contains(t, err.Error(), "--allow-insecure-config")
			require.NotContains(t, err.Error(), "hunter2", "the message never shows the secret")
			_, err = config.LoadWith(p, env(nil), config.LoadOptions{AllowInsecure: true})
			require.NoError(t, err, "allowed on purpose")
		}
		_, err := config.Load(withMode(body, 0o600), env(nil))
		require.NoError(t, err)
	}
	_, err := config.Load(withMode("[http]\naddr = \"127.0.0.1:9000\"\n[database]\nurl = \"postgres://ann@db/app\"\n", 0o644), env(nil))
	require.NoError(t, err, "a readable file without secrets is fine")
	require.True(t, config.DSNHasPassword("postgres://ann@db/app?password=x"))
	require.False(t, config.DSNHasPassword("postgres://ann@db/app?sslmode=require"))
}
