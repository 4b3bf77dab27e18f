// Package clipboard copies the workbench's selection (y) where a person can paste it from, and
// says truthfully where that is. A terminal takes an OSC 52 sequence without answering, and tmux
// drops one from a program unless its set-clipboard option is "on" (the default, "external",
// drops it): so a copy counts as done only when it can be confirmed — under tmux with
// set-clipboard on, by reading tmux's buffer back — and otherwise the text is also written to a
// file, and the status line names it.
package clipboard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/aymanbagabas/go-osc52/v2"
)

// Terminal copies through the terminal the workbench runs in.
type Terminal struct {
	// Out is the terminal (OSC 52 is written to it).
	Out io.Writer
	// Tmux is the tmux session's socket ($TMUX; "" outside tmux).
	Tmux string
	// Dir is where the fallback file goes.
	Dir string
	// Tmuxctl runs a tmux command and returns its output (nil: the tmux binary).
	Tmuxctl func(ctx context.Context, stdin []byte, args ...string) ([]byte, error)
	// ConfirmWithin bounds the wait for tmux to take the OSC 52 sequence in (0: 2 s). A copy
	// tmux takes is confirmed as soon as it does; only one it never takes waits this long.
	ConfirmWithin time.Duration
}

// New is the terminal on out, in the tmux of the environment if any, the fallback file under the
// user's cache directory (the temporary directory when there is none).
func New(out io.Writer) *Terminal {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return &Terminal{Out: out, Tmux: os.Getenv("TMUX"), Dir: filepath.Join(dir, "idemwork")}
}

// Copy sends text to the clipboard by OSC 52 and says where it went: the clipboard when that is
// confirmed, else (too) the file it saved the text to. It may block while tmux reads the sequence
// (ConfirmWithin); run it off the UI's goroutine.
func (t *Terminal) Copy(text string) (string, error) {
	if t.Out != nil {
		if _, err := osc52.New(text).WriteTo(t.Out); err != nil {
			return "", fmt.Errorf("write OSC 52 to the terminal: %w", err)
		}
	}
	why := "this terminal does not answer OSC 52, so the copy cannot be confirmed"
	if t.Tmux != "" {
		ok, reason := t.confirmTmux(text)
		if ok {
			return "copied to the clipboard (tmux confirmed it: set-clipboard on)", nil
		}
		why = reason
	}
	path, err := t.save(text)
	if err != nil {
		return "", fmt.Errorf("%s, and saving it to a file failed: %w", why, err)
	}
	return why + "; saved to " + path, nil
}

// confirmTmux reports whether tmux took the text in (its newest buffer holds it), or why not.
func (t *Terminal) confirmTmux(text string) (bool, string) {
	within := t.ConfirmWithin
	if within <= 0 {
		within = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	out, err := t.tmux(ctx, nil, "show-options", "-gv", "set-clipboard")
	if err != nil {
		return false, "tmux did not say whether it takes OSC 52 (" + firstLine(err.Error()) + ")"
	}
	if mode := strings.TrimSpace(string(out)); mode != "on" {
		return false, "tmux drops OSC 52 from programs (set-clipboard is " + mode + "; set it to on to copy through tmux)"
	}
	// tmux reads the pane's output on its own time: poll its newest buffer until it holds the text.
	for {
		buf, err := t.tmux(ctx, nil, "show-buffer")
		if err == nil && bytes.Equal(buf, []byte(text)) {
			return true, ""
		}
		select {
		case <-ctx.Done():
			return false, "tmux did not take the OSC 52 sequence within " + within.String()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (t *Terminal) tmux(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	if t.Tmuxctl != nil {
		return t.Tmuxctl(ctx, stdin, args...)
	}
	cmd := exec.CommandContext(ctx, "tmux", args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil && stderr.Len() > 0 {
		err = errors.New(strings.TrimSpace(stderr.String()))
	}
	return out, err
}

// save writes text to the fallback file (readable by this user only: it may hold a payload).
func (t *Terminal) save(text string) (string, error) {
	if err := os.MkdirAll(t.Dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(t.Dir, "copied.txt")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return "", err
	}
	return path, nil
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
