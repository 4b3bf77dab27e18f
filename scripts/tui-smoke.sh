#!/usr/bin/env bash
# End-to-end check of the real binary in a real terminal (tmux): start the workbench on a fresh
# data dir, create a record with a chosen key, send it again (it must replay), fire a 50-request
# storm, read "EXECUTED 1" and the verdict on screen, quit with q, and check that no
# server process of that data dir remains.
set -euo pipefail
BIN=${1:-bin/idemwork}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
work=$(mktemp -d /tmp/idemwork-smoke-XXXXXX)
chmod 755 "$work" # as root the server runs as postgres, which must enter it
data=$work/pg
sess=idemwork-smoke-$$
export XDG_CONFIG_HOME=$work/config

cleanup() {
  tmux kill-session -t "$sess" 2>/dev/null || true
  "$BIN" --data-dir "$data" db stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

screen() { tmux capture-pane -t "$sess" -p; }
fail() {
  echo "tui-smoke: FAIL: $*" >&2
  echo "---- screen ----" >&2
  screen >&2 || true
  exit 1
}
wait_for() { # text, seconds
  local deadline=$((SECONDS + ${2:-20}))
  until screen | grep -qF -- "$1"; do
    [ $SECONDS -lt $deadline ] || fail "did not see '$1' within ${2:-20}s"
    sleep 0.2
  done
}
keys() { tmux send-keys -t "$sess" "$@"; sleep 0.3; }
text() { tmux send-keys -t "$sess" -l "$1"; sleep 0.3; }

tmux new-session -d -s "$sess" -x 120 -y 40 "'$BIN' --data-dir '$data' --owner smoke; echo IDEMWORK-EXITED-\$?; sleep 120"
wait_for "1 Records" 60
wait_for "Records of smoke"
echo "tui-smoke: navigator up"

keys c
wait_for "Create a record"
keys Tab          # Module -> Idempotency-Key
keys C-u
text "smoke-key-1"
keys Tab          # -> Title
text "smoke record"
keys C-s
wait_for "EXECUTED NOTE:record:create"
echo "tui-smoke: created with key smoke-key-1"
keys C-r          # the same request again
wait_for "REPLAYED NOTE:record:create"
echo "tui-smoke: replayed"
keys Escape
sleep 0.5

keys 6
wait_for "Replay storm"
keys f
wait_for "50/50" 60
wait_for "EXECUTED 1" 10
wait_for "verdict  ✓ agrees" 30
echo "tui-smoke: storm of 50: EXECUTED 1, verified by the database"

keys q
wait_for "IDEMWORK-EXITED-0" 30
if pgrep -f -- "-D $data" >/dev/null; then
  fail "a server process for $data is still running after quit"
fi
echo "tui-smoke: quit with q; no server process remains"
