package clipboard_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/clipboard"
)

// inTmux starts a tmux server of its own whose one pane prints what is written to the returned
// file — as the workbench's OSC 52 reaches tmux — with set-clipboard set to mode.
func inTmux(t *testing.T, mode string) (*clipboard.Terminal, string) {
	t.Helper()
	dir := t.TempDir()
	sock, fifo := filepath.Join(dir, "tmux.sock"), filepath.Join(dir, "pane")
	ctl := func(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "tmux", append([]string{"-S", sock, "-f", "/dev/null"}, args...)...)
		cmd.Stdin = strings.NewReader(string(stdin))
		return cmd.Output()
	}
	ctx := context.Background()
	require.NoError(t, exec.Command("mkfifo", fifo).Run())
	_, err := ctl(ctx, nil, "new-session", "-d", "-x", "80", "-y", "24", "cat "+fifo+"; sleep 60")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = ctl(context.Background(), nil, "kill-server") })
	_, err = ctl(ctx, nil, "set-option", "-g", "set-clipboard", mode)
	require.NoError(t, err)
	out, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = out.Close() })
	// A loaded machine may take its time; a copy tmux takes is confirmed as soon as it does.
	return &clipboard.Terminal{Out: out, Tmux: sock, Dir: filepath.Join(dir, "cache"), Tmuxctl: ctl, ConfirmWithin: 30 * time.Second}, dir
}

// Under tmux with set-clipboard on, tmux takes the OSC 52 sequence in: the copy is confirmed by
// reading tmux's buffer back, and no file is written.
func TestACopyTmuxTookIsConfirmed(t *testing.T) {
	t.Parallel()
	c, _ := inTmux(t, "on")
	said, err := c.Copy("01JDEMONOTE000000000000001")
	require.NoError(t, err)
	require.Equal(t, "copied to the clipboard (tmux confirmed it: set-clipboard on)", said)
	require.NoFileExists(t, filepath.Join(c.Dir, "copied.txt"))
}

// tmux's default, set-clipboard external, drops a program's OSC 52: the copy is not claimed, the
// text goes to a file (this user's only), and the status says why and where.
func TestACopyTmuxDroppedGoesToAFileAndSaysWhere(t *testing.T) {
	t.Parallel()
	c, _ := inTmux(t, "external")
	said, err := c.Copy("a payload {\"x\": 1}\n")
	require.NoError(t, err)
	path := filepath.Join(c.Dir, "copied.txt")
	require.Equal(t, "tmux drops OSC 52 from programs (set-clipboard is external; set it to on to copy through tmux); saved to "+path, said)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "a payload {\"x\": 1}\n", string(got))
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}

// Outside tmux nothing answers an OSC 52: the text is sent and saved, and the status says both.
func TestACopyOutsideTmuxIsSentAndSaved(t *testing.T) {
	t.Parallel()
	var term strings.Builder
	c := &clipboard.Terminal{Out: &term, Dir: t.TempDir(), ConfirmWithin: time.Minute}
	start := time.Now()
	said, err := c.Copy("key-1")
	require.NoError(t, err)
	require.Less(t, time.Since(start), 30*time.Second, "nothing waited for a confirmation that cannot come")
	require.Contains(t, term.String(), "\x1b]52;c;a2V5LTE=\a", "the OSC 52 sequence went to the terminal")
	require.Equal(t, "this terminal does not answer OSC 52, so the copy cannot be confirmed; saved to "+filepath.Join(c.Dir, "copied.txt"), said)
}
