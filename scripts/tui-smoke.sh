#!/usr/bin/env bash
# End-to-end check of the real binary in a real terminal (tmux): start the workbench on a fresh
# data dir (the first frame says the cluster is being created), create a record with a chosen
# key, send it again (it must replay), plant hostile rows with psql (a title holding ESC [2J and a
# newline, a committed PROCESSING key) and read them shown, not obeyed, fire a 50-request storm,
# read "EXECUTED 1" and the verdict on screen, storm the form's key with the form's fields (it
# replays, never KEY_REUSED), switch owners and see the storm refuse (0 requests), quit with q; start again under NO_COLOR at 80x24,
# find the selected row in reverse video, run both demo walk-throughs to their end and open the
# side-by-side comparison; check that no server process remains.
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
screen_attrs() { tmux capture-pane -t "$sess" -e -p; }
fail() {
  echo "tui-smoke: FAIL: $*" >&2
  echo "---- screen ----" >&2
  screen >&2 || true
  # Again under the screen: a log shown by its tail (CI's) then still says what failed.
  echo "tui-smoke: FAIL: $*" >&2
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
wait_for "creating the database cluster" 10
echo "tui-smoke: the first frame says the cluster is being created"
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

# Hostile rows, planted the way an old database or psql holds them.
url=$("$BIN" --data-dir "$data" db url)
psql -q "$url" -c "UPDATE record SET title = E'\\x1b[2J\\x1b[31mCLEARED\\ntwo' WHERE owner_id = 'smoke'" \
  -c "INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at)
      VALUES ('smoke', 'stuck-key', 'NOTE:record:create', repeat('a', 64), 'PROCESSING', NULL, now(), now() + interval '1 hour', now())"
keys 1
keys Escape       # the form's write opened its record: back to the list
keys r
wait_for "␛[2J␛[31mCLEARED␊two"
screen | grep -qF "Records of smoke" || fail "the hostile title cleared the screen"
echo "tui-smoke: a title holding ESC [2J and a newline is shown, one row, the screen intact"
keys 2
keys r
wait_for "stuck-key"
keys g
keys Enter
wait_for "409 IDEMPOTENCY_IN_PROGRESS"
wait_for "key stuck-key · PROCESSING"
echo "tui-smoke: a committed PROCESSING key opens and says the next request gets 409"
keys Escape
sleep 0.3

keys 6
wait_for "Replay storm"
keys f
wait_for "50/50" 60
wait_for "EXECUTED 1" 10
wait_for "verdict  ✓ agrees" 30
echo "tui-smoke: storm of 50: EXECUTED 1, verified by the database"

# The form's create, stormed under its key with the form's fields: one request, one body.
keys e
keys Down Down C-u   # past the Module (NOTE, as the form's)
text "smoke-key-1"
keys Down C-u
text "smoke record"
keys Down Down Down C-u
text "200"
keys C-s
wait_for "settings saved"
screen | grep -qF "storm #2" && fail "ctrl+s fired the storm"
keys f
wait_for "storm #2 fired" 10
wait_for "200/200" 60
wait_for "verdict  ✓ agrees" 30
screen | grep -qF "KEY_REUSED" && fail "a storm of the form's key and body was IDEMPOTENCY_KEY_REUSED"
screen | grep -qE "(REPLAYED|JOINED) [0-9]+" || fail "the storm of the form's key did not replay"
echo "tui-smoke: the form's create stormed ×200 under its key: replayed, never KEY_REUSED"

# A record's storm after an owner switch fires nothing at the other owner's record.
keys 1
keys g
keys s
wait_for "fires at smoke's NOTE"
keys Escape
keys O C-u
text "nobody"
keys Enter
wait_for "Replay storm · fires at nothing"
keys f
wait_for "not fired, 0 requests sent: RECORD_NOT_FOUND"
screen | grep -qF "storm #3" && fail "a storm was fired at another owner's record"
echo "tui-smoke: after an owner switch the storm refuses, RECORD_NOT_FOUND, 0 requests"

keys q
wait_for "IDEMWORK-EXITED-0" 30
tmux kill-session -t "$sess"

# NO_COLOR: no colour, but the selected row in reverse video and marked.
tmux new-session -d -s "$sess" -x 80 -y 24 "NO_COLOR=1 '$BIN' --data-dir '$data' --owner smoke; echo IDEMWORK-EXITED-\$?; sleep 120"
wait_for "Records of smoke" 60
# The heading comes first, the rows when the first page is read (on a busy machine, seconds later).
wait_for "│> " 30
screen_attrs | grep "│" | grep -q $'\e\[[0-9;]*7[;m]' || fail "NO_COLOR: the selected row is not in reverse video"
if screen_attrs | grep -qE $'\e\[[0-9;]*(3[0-7]|38|4[0-7]|48|9[0-7])[;m]'; then fail "NO_COLOR: colour on screen"; fi
echo "tui-smoke: NO_COLOR: no colour; the selected row is marked and in reverse video"

# NO_COLOR: a storm's progress bar, which paints its own gradient, draws none either.
keys 6
wait_for "Replay storm"
keys f
wait_for "50/50" 60
wait_for "verdict  ✓ agrees" 30
screen | grep -qF "███" || fail "NO_COLOR: the storm's progress bar is not drawn"
if screen_attrs | grep -qE $'\e\[[0-9;]*(3[0-7]|38|4[0-7]|48|9[0-7])[;m]'; then fail "NO_COLOR: colour in the storm view (its progress bar?)"; fi
echo "tui-smoke: NO_COLOR: a storm's progress bar and verdict without colour"

# The Demo at 80x24: both walk-throughs to their end, every claim checked, then side by side.
keys 9
wait_for "next (n): step 1/3"
screen_attrs | grep -F "blocked_external" | grep -q $'\e\[[0-9;]*7[;m]' || fail "NO_COLOR: the shown demo part is not in reverse video"
for i in 1 2 3; do keys n; done
wait_for "done · o: the outbox that replaces it" 30
keys o
for i in 1 2 3 4 5 6 7 8 9; do
  if [ $i -lt 9 ]; then next="step $((i + 1))/9"; else next="done · c: both modes"; fi
  keys n
  wait_for "$next" 30
  if screen | grep -qF "✗"; then fail "a claim of the outbox walk-through failed against the database"; fi
done
screen | head -1 | grep -qF "clock +" || fail "the header does not show the clock the walk-through moved"
echo "tui-smoke: Demo: blocked_external and the outbox instead ran to their end at 80x24, no claim failed"
keys c
wait_for "committed in the request's transaction" 20
echo "tui-smoke: Demo: the two modes side by side"
keys q
wait_for "IDEMWORK-EXITED-0" 30
if pgrep -f -- "-D $data" >/dev/null; then
  fail "a server process for $data is still running after quit"
fi
echo "tui-smoke: quit with q; no server process remains"
