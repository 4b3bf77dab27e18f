// Package config loads idemwork's settings: defaults, then a TOML file (strict: an unknown key
// is an error naming it), then environment variables, then command-line flags (applied by the
// caller through Overrides). Every key is documented in config.example.toml.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// Duration is a time.Duration written as "24h", "90s" in TOML.
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration (e.g. \"24h\", \"90s\")", string(b))
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration back in Go syntax.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Config is the whole configuration.
type Config struct {
	Database    Database    `toml:"database"`
	Idempotency Idempotency `toml:"idempotency"`
	Modules     Modules     `toml:"modules"`
	HTTP        HTTP        `toml:"http"`
	TUI         TUI         `toml:"tui"`
	Outbox      Outbox      `toml:"outbox"`

	// Source names the file the settings came from ("" for defaults only).
	Source string `toml:"-"`
}

// Database selects and tunes the database.
type Database struct {
	URL         string `toml:"url"`
	AllowWrites bool   `toml:"allow_writes"`
	DataDir     string `toml:"data_dir"`
	PGBinDir    string `toml:"pg_bindir"`
	TCPPort     int    `toml:"tcp_port"`
	MaxConns    int    `toml:"max_conns"`
	// Pooler is what sits in front of the database given by url: "none" (default), "session"
	// or "transaction" (pgbouncer's pool modes).
	Pooler string `toml:"pooler"`
	// Schema puts idemwork's tables in this schema (search_path); "" keeps the server's default.
	Schema string `toml:"schema"`
	// RequireSynchronousReplication refuses every write with REPLICATION_UNSAFE while no
	// synchronous standby confirms commits (IDEMWORK_REQUIRE_SYNC).
	RequireSynchronousReplication bool `toml:"require_synchronous_replication"`
}

// Idempotency tunes the runner.
type Idempotency struct {
	TTL Duration `toml:"ttl"`
	// AcquireTimeout bounds a write's wait for a database connection (and for its owner's share
	// of the pool): past it the write is 503 OVERLOADED with Retry-After.
	AcquireTimeout Duration `toml:"acquire_timeout"`
	// OwnerMaxConns caps the connections one owner's writes hold at once; 0 is half the pool.
	OwnerMaxConns int `toml:"owner_max_conns"`
	// KeyMaxConns is how many requests of one key go to the database at once; more wait in
	// the process without a connection.
	KeyMaxConns int `toml:"key_max_conns"`
	// ReapInterval is how often `idemwork serve` deletes expired keys (0 disables the reaper).
	ReapInterval Duration `toml:"reap_interval"`
}

// Bounds of idempotency.ttl: below a second a key expires while its own storm still runs (one
// key executed 19 times in a 200-request storm at 1ns); above MaxTTL rows pile up unreaped.
const (
	MinTTL = time.Second
	MaxTTL = 30 * 24 * time.Hour
)

// Modules holds the module rules that can change at run time.
type Modules struct {
	MEM001 MemModule `toml:"MEM-001"`
}

// MemModule is MEM-001's rule set.
type MemModule struct {
	MaxContentLength int `toml:"max_content_length"`
}

// HTTP configures idemwork serve.
type HTTP struct {
	Addr         string            `toml:"addr"`
	MaxBodyBytes int64             `toml:"max_body_bytes"`
	Tokens       map[string]string `toml:"tokens"`
	// RequireKey makes a write without an Idempotency-Key 400 BAD_REQUEST.
	RequireKey bool `toml:"require_key"`
	// OwnerMaxReads bounds the reads one owner runs at once; 0 is half this process's CPUs (at least 1).
	OwnerMaxReads int `toml:"owner_max_reads"`
}

// TUI configures the workbench.
type TUI struct {
	Owner string `toml:"owner"`
}

// Outbox configures the delivery worker.
type Outbox struct {
	MaxAttempts int      `toml:"max_attempts"`
	BaseBackoff Duration `toml:"base_backoff"`
	// MaxBackoff caps the doubling retry delay.
	MaxBackoff Duration `toml:"max_backoff"`
	// Lease hides a claimed message from other workers while its provider call runs.
	Lease Duration `toml:"lease"`
	// CallTimeout bounds one provider call; it must be below Lease.
	CallTimeout Duration `toml:"call_timeout"`
	// Concurrency is how many provider calls one delivery pass runs at once.
	Concurrency int `toml:"concurrency"`
}

// Floors and ceilings of the durations (config.example.toml documents each): below a floor a
// setting turns into a busy loop or a lease nothing fits in (a reap_interval of 1ns ran 50,174
// DELETEs in 5 s), above a ceiling into something that never happens.
const (
	MinAcquireTimeout = 10 * time.Millisecond
	MaxAcquireTimeout = 5 * time.Minute
	MinReapInterval   = time.Second
	MaxReapInterval   = 24 * time.Hour
	MinBackoff        = 10 * time.Millisecond
	MaxBackoff        = 24 * time.Hour
	MinLease          = time.Second
	MaxLease          = time.Hour
	MinCallTimeout    = 10 * time.Millisecond
	MaxConcurrency    = 64
)

// Default returns the built-in settings.
func Default() Config {
	return Config{
		Idempotency: Idempotency{TTL: Duration{24 * time.Hour}, AcquireTimeout: Duration{5 * time.Second}, KeyMaxConns: 8,
			ReapInterval: Duration{5 * time.Minute}},
		Modules: Modules{MEM001: MemModule{MaxContentLength: 2000}},
		HTTP:    HTTP{Addr: "127.0.0.1:8787", MaxBodyBytes: 256 << 10, Tokens: map[string]string{}},
		TUI:     TUI{Owner: "alice"},
		Outbox: Outbox{MaxAttempts: 5, BaseBackoff: Duration{500 * time.Millisecond}, MaxBackoff: Duration{5 * time.Minute},
			Lease: Duration{30 * time.Second}, CallTimeout: Duration{10 * time.Second}, Concurrency: 4},
	}
}

// DefaultPath is $XDG_CONFIG_HOME/idemwork/config.toml, else ~/.config/idemwork/config.toml.
func DefaultPath() string {
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "idemwork", "config.toml")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".config", "idemwork", "config.toml")
}

// Getenv is how Load reads the environment; tests pass a map's lookup.
type Getenv func(string) string

// LoadOptions tune Load.
type LoadOptions struct {
	// AllowInsecure accepts a file holding secrets (http.tokens, a password in database.url)
	// that other users can read (--allow-insecure-config).
	AllowInsecure bool
}

// Load reads path (explicit: it must exist), else IDEMWORK_CONFIG, else the default path when
// present, over the defaults, then applies the environment. A file holding secrets must be
// readable by its owner alone (LoadWith to allow otherwise).
func Load(path string, getenv Getenv) (Config, error) { return LoadWith(path, getenv, LoadOptions{}) }

// LoadWith is Load with options.
func LoadWith(path string, getenv Getenv, opts LoadOptions) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg := Default()
	explicit := path != ""
	if !explicit {
		if p := getenv("IDEMWORK_CONFIG"); p != "" {
			path, explicit = p, true
		} else {
			path = DefaultPath()
		}
	}
	if path != "" {
		b, mode, err := readFile(path)
		switch {
		case err == nil:
			if err := Decode(b, &cfg); err != nil {
				return Config{}, fmt.Errorf("config %s: %w", path, err)
			}
			if secrets := cfg.secrets(); len(secrets) > 0 && mode&0o044 != 0 && !opts.AllowInsecure {
				return Config{}, fmt.Errorf("config %s holds %s but other users can read it (mode %04o): run chmod 600 %s (or pass --allow-insecure-config to use it anyway)",
					path, strings.Join(secrets, " and "), mode.Perm(), path)
			}
			cfg.Source = path
		case explicit || !errors.Is(err, os.ErrNotExist):
			return Config{}, fmt.Errorf("config: %w", err)
		}
	}
	if err := cfg.applyEnv(getenv); err != nil {
		return Config{}, err
	}
	if err := cfg.Validate(); err != nil {
		if cfg.Source != "" {
			return Config{}, fmt.Errorf("config %s: %w", cfg.Source, err)
		}
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return cfg, nil
}

// readFile reads path and the permission bits of the very file it read.
func readFile(path string) ([]byte, os.FileMode, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	b, err := io.ReadAll(f)
	return b, st.Mode().Perm(), err
}

// secrets names the secrets the settings hold (before the environment is applied: the file's).
func (c *Config) secrets() []string {
	var out []string
	if len(c.HTTP.Tokens) > 0 {
		out = append(out, "bearer tokens ([http.tokens])")
	}
	if DSNHasPassword(c.Database.URL) {
		out = append(out, "a database password (database.url)")
	}
	return out
}

var kvPassword = regexp.MustCompile(`(?i)(^|\s)password\s*=\s*\S`)

// DSNHasPassword reports whether a PostgreSQL URL or key=value connection string carries a
// password.
func DSNHasPassword(dsn string) bool {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		if _, set := u.User.Password(); set {
			return true
		}
		return u.Query().Get("password") != ""
	}
	return kvPassword.MatchString(dsn)
}

// Decode parses TOML strictly into cfg (over whatever cfg already holds).
func Decode(b []byte, cfg *Config) error {
	dec := toml.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cfg); err != nil {
		var strict *toml.StrictMissingError
		if errors.As(err, &strict) {
			var keys []string
			for _, e := range strict.Errors {
				row, _ := e.Position()
				keys = append(keys, fmt.Sprintf("%s (line %d)", strings.Join(e.Key(), "."), row))
			}
			return fmt.Errorf("unknown key %s; see config.example.toml for the keys idemwork reads", strings.Join(keys, ", "))
		}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			key := strings.Join(de.Key(), ".")
			if key != "" {
				return fmt.Errorf("key %s (line %d, column %d): %s", key, row, col, de.Error())
			}
			return fmt.Errorf("line %d, column %d: %s", row, col, de.Error())
		}
		return err
	}
	return nil
}

func (c *Config) applyEnv(getenv Getenv) error {
	// SPEC §10.1: IDEMWORK_DSN wins over DATABASE_URL, both over the file.
	if v := getenv("DATABASE_URL"); v != "" {
		c.Database.URL = v
	}
	if v := getenv("IDEMWORK_DSN"); v != "" {
		c.Database.URL = v
	}
	if v := getenv("IDEMWORK_DATA_DIR"); v != "" {
		c.Database.DataDir = v
	}
	if v := getenv("IDEMWORK_PG_BINDIR"); v != "" {
		c.Database.PGBinDir = v
	}
	if v := getenv("IDEMWORK_ALLOW_WRITES"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("IDEMWORK_ALLOW_WRITES=%q: want true or false", v)
		}
		c.Database.AllowWrites = b
	}
	if v := getenv("IDEMWORK_OWNER"); v != "" {
		c.TUI.Owner = v
	}
	if v := getenv("IDEMWORK_POOLER"); v != "" {
		c.Database.Pooler = v
	}
	if v := getenv("IDEMWORK_SCHEMA"); v != "" {
		c.Database.Schema = v
	}
	if v := getenv("IDEMWORK_REQUIRE_SYNC"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("IDEMWORK_REQUIRE_SYNC=%q: want true or false", v)
		}
		c.Database.RequireSynchronousReplication = b
	}
	return nil
}

// outside reports whether d lies outside [lo, hi].
func outside(d Duration, lo, hi time.Duration) bool { return d.Duration < lo || d.Duration > hi }

var ownerRE = regexp.MustCompile(`^[A-Za-z0-9._:@-]{1,128}$`)

// Validate checks every value and names the key of the first bad one.
func (c *Config) Validate() error {
	switch {
	case c.Idempotency.TTL.Duration < MinTTL || c.Idempotency.TTL.Duration > MaxTTL:
		return fmt.Errorf("idempotency.ttl must be between %s and %s (720h), got %s", MinTTL, MaxTTL, c.Idempotency.TTL)
	case outside(c.Idempotency.AcquireTimeout, MinAcquireTimeout, MaxAcquireTimeout):
		return fmt.Errorf("idempotency.acquire_timeout must be between %s and %s, got %s", MinAcquireTimeout, MaxAcquireTimeout, c.Idempotency.AcquireTimeout)
	case c.Idempotency.OwnerMaxConns < 0 || c.Idempotency.OwnerMaxConns > 1000:
		return fmt.Errorf("idempotency.owner_max_conns must be 0 (half the pool) to 1000, got %d", c.Idempotency.OwnerMaxConns)
	case c.Idempotency.KeyMaxConns < 1 || c.Idempotency.KeyMaxConns > 1000:
		return fmt.Errorf("idempotency.key_max_conns must be 1 to 1000, got %d", c.Idempotency.KeyMaxConns)
	case c.Modules.MEM001.MaxContentLength <= 0:
		return fmt.Errorf("modules.MEM-001.max_content_length must be positive, got %d", c.Modules.MEM001.MaxContentLength)
	case c.Database.TCPPort < -1 || c.Database.TCPPort > 65535:
		return fmt.Errorf("database.tcp_port must be 0 (socket only), -1 (any free port) or 1-65535, got %d", c.Database.TCPPort)
	case c.Database.MaxConns < 0 || c.Database.MaxConns > 1000:
		return fmt.Errorf("database.max_conns must be 0 (default) to 1000, got %d", c.Database.MaxConns)
	case c.Database.Pooler != "" && c.Database.Pooler != "none" && c.Database.Pooler != "session" && c.Database.Pooler != "transaction":
		return fmt.Errorf("database.pooler must be \"none\", \"session\" or \"transaction\", got %q", c.Database.Pooler)
	case len(c.Database.Schema) > 63 || strings.ContainsRune(c.Database.Schema, 0):
		return fmt.Errorf("database.schema %q is not a schema name (at most 63 bytes, no NUL)", c.Database.Schema)
	case c.HTTP.OwnerMaxReads < 0 || c.HTTP.OwnerMaxReads > 1000:
		return fmt.Errorf("http.owner_max_reads must be 0 (half this process's CPUs) to 1000, got %d", c.HTTP.OwnerMaxReads)
	case c.HTTP.MaxBodyBytes <= 0:
		return fmt.Errorf("http.max_body_bytes must be positive, got %d", c.HTTP.MaxBodyBytes)
	case c.Outbox.MaxAttempts <= 0:
		return fmt.Errorf("outbox.max_attempts must be positive, got %d", c.Outbox.MaxAttempts)
	case outside(c.Outbox.BaseBackoff, MinBackoff, MaxBackoff):
		return fmt.Errorf("outbox.base_backoff must be between %s and %s, got %s", MinBackoff, MaxBackoff, c.Outbox.BaseBackoff)
	case outside(c.Outbox.MaxBackoff, c.Outbox.BaseBackoff.Duration, MaxBackoff):
		return fmt.Errorf("outbox.max_backoff must be between outbox.base_backoff (%s) and %s, got %s", c.Outbox.BaseBackoff, MaxBackoff, c.Outbox.MaxBackoff)
	case outside(c.Outbox.Lease, MinLease, MaxLease):
		return fmt.Errorf("outbox.lease must be between %s and %s, got %s", MinLease, MaxLease, c.Outbox.Lease)
	case c.Outbox.CallTimeout.Duration < MinCallTimeout || c.Outbox.CallTimeout.Duration >= c.Outbox.Lease.Duration:
		return fmt.Errorf("outbox.call_timeout must be at least %s and below outbox.lease (%s), got %s: a provider call that outlives its lease lets another worker deliver the message too", MinCallTimeout, c.Outbox.Lease, c.Outbox.CallTimeout)
	case c.Outbox.Concurrency < 1 || c.Outbox.Concurrency > MaxConcurrency:
		return fmt.Errorf("outbox.concurrency must be 1 to %d, got %d", MaxConcurrency, c.Outbox.Concurrency)
	case c.Idempotency.ReapInterval.Duration != 0 && outside(c.Idempotency.ReapInterval, MinReapInterval, MaxReapInterval):
		return fmt.Errorf("idempotency.reap_interval must be 0 (no reaper) or between %s and %s, got %s", MinReapInterval, MaxReapInterval, c.Idempotency.ReapInterval)
	case !ownerRE.MatchString(c.TUI.Owner):
		return fmt.Errorf("tui.owner %q is not an owner id (1-128 of A-Z a-z 0-9 . _ : @ -)", c.TUI.Owner)
	}
	if _, _, err := net.SplitHostPort(c.HTTP.Addr); err != nil {
		return fmt.Errorf("http.addr %q: want host:port, e.g. 127.0.0.1:8787", c.HTTP.Addr)
	}
	for token, owner := range c.HTTP.Tokens {
		if len(token) < 8 {
			return fmt.Errorf("http.tokens: a token must be at least 8 characters (owner %q has a shorter one)", owner)
		}
		if !ownerRE.MatchString(owner) {
			return fmt.Errorf("http.tokens: %q is not an owner id", owner)
		}
	}
	return nil
}
