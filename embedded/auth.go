package embedded

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
)

// The private cluster's access rules. The Unix socket lives in a directory only the server's OS
// user may enter (mode 0700, and the socket itself 0700), so trusting it trusts that user alone
// (and root). Loopback TCP reaches every local account, so it asks for the password of a role:
// scram-sha-256, with a password idemwork generates on first use and keeps 0600 in the data dir.
const hbaConf = `# Written by idemwork at every start of its private cluster; edits are overwritten.
# The socket directory is owner-only, so local connections come from the server's OS user (or root).
local   all           all                     trust
local   replication   all                     trust
# Loopback TCP reaches every local account: it needs the password (` + passwordFileName + ` in this directory).
host    all           all     127.0.0.1/32    scram-sha-256
host    all           all     ::1/128         scram-sha-256
host    replication   all     127.0.0.1/32    scram-sha-256
host    replication   all     ::1/128         scram-sha-256
`

// passwordFileName holds the password of the postgres role for TCP connections (mode 0600).
const passwordFileName = "idemwork-password"

// serverRole is the cluster's superuser, the role idemwork connects as.
const serverRole = "postgres"

// writeHBA installs idemwork's pg_hba.conf in dataDir (owned by the server user).
func writeHBA(dataDir string, cred *syscall.Credential) error {
	path := filepath.Join(dataDir, "pg_hba.conf")
	if b, err := os.ReadFile(path); err == nil && string(b) == hbaConf {
		return nil
	}
	if err := writePrivate(path, []byte(hbaConf), cred); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writePrivate writes a 0600 file atomically (a rename), owned by the server user.
func writePrivate(path string, b []byte, cred *syscall.Credential) error {
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := errors.Join(werr, cerr, chownIfRoot(tmp, cred)); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// ensurePassword returns the cluster's TCP password, generating and storing it on first use.
func ensurePassword(dataDir string, cred *syscall.Credential) (string, error) {
	path := filepath.Join(dataDir, passwordFileName)
	if pw, err := readPassword(dataDir); err == nil && pw != "" {
		return pw, nil
	}
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	pw := base64.RawURLEncoding.EncodeToString(raw)
	if err := writePrivate(path, []byte(pw+"\n"), cred); err != nil {
		return "", fmt.Errorf("store the cluster's password in %s: %w", path, err)
	}
	return pw, nil
}

// readPassword reads the stored TCP password ("" and an error when there is none).
func readPassword(dataDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, passwordFileName))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// setRolePassword gives the postgres role the password, as a SCRAM-SHA-256 secret computed
// here (the plain password never reaches the server or its log). A hot standby replays its
// primary's roles and cannot change them; it is left alone.
func setRolePassword(ctx context.Context, socketDSN, password string) error {
	conn, err := pgx.Connect(ctx, socketDSN)
	if err != nil {
		return fmt.Errorf("set the cluster's password: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var standby bool
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&standby); err != nil {
		return fmt.Errorf("set the cluster's password: %w", err)
	}
	if standby {
		return nil
	}
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return err
	}
	secret, err := scramSecret(password, salt, 4096)
	if err != nil {
		return err
	}
	// The secret holds only [A-Za-z0-9+/=$:-]: safe inside a quoted literal.
	if _, err := conn.Exec(ctx, "ALTER ROLE "+serverRole+" PASSWORD '"+secret+"'"); err != nil {
		return fmt.Errorf("set the cluster's password: %w", err)
	}
	return nil
}

// scramSecret is PostgreSQL's stored form of a SCRAM-SHA-256 password (RFC 5802, 7677):
// SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>, base64.
func scramSecret(password string, salt []byte, iter int) (string, error) {
	salted, err := pbkdf2.Key(sha256.New, password, salt, iter, sha256.Size)
	if err != nil {
		return "", err
	}
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	stored := sha256.Sum256(mac(salted, "Client Key"))
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iter, b64(salt), b64(stored[:]), b64(mac(salted, "Server Key"))), nil
}

// checkPrivateDir verifies that dir is a real directory only owner may enter, owned by the
// server's user: a socket directory another account made (in /tmp, say) could hand it our socket.
func checkPrivateDir(dir string, cred *syscall.Credential) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil {
		return fmt.Errorf("socket dir %s: %w", dir, err)
	}
	uid := uint32(os.Geteuid())
	if cred != nil {
		uid = cred.Uid
	}
	switch {
	case st.Mode&syscall.S_IFMT != syscall.S_IFDIR:
		return fmt.Errorf("socket dir %s is not a directory (a symlink?): remove it", dir)
	case st.Uid != uid:
		return fmt.Errorf("socket dir %s belongs to uid %d, not to the server's user (uid %d): remove it", dir, st.Uid, uid)
	case st.Mode&0o077 != 0:
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("socket dir %s is open to other users (mode %04o) and cannot be closed: %w", dir, st.Mode&0o7777, err)
		}
	}
	return nil
}
