#!/usr/bin/env bash
# The progress line as a new user met it in a real terminal (tmux, issue 27): Ctrl-C on an
# 80-column terminal leaves one line (its "^C" echo no longer wraps, so the last redraw lands on
# the same row), a 20-column terminal shows whole parts only, and with -l the percentage and the
# ETA count lines (at the rate in force while the free first line keeps the average above it).
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"

session="ratelimit-e2e-$$"
trap 'tmux kill-session -t "$session" 2>/dev/null || true; rm -rf "$WORK"' EXIT

# run_in_terminal COLUMNS COMMAND: a fresh session of that width running COMMAND, then its status.
run_in_terminal() {
  tmux kill-session -t "$session" 2>/dev/null || true
  tmux new-session -d -s "$session" -x "$1" -y 10 "$2; echo status=\$?; sleep 30"
}

# wait_for_screen PATTERN: the screen once a line matches PATTERN (within 10 s), in $screen.
wait_for_screen() {
  for _ in $(seq 100); do
    screen=$(tmux capture-pane -p -t "$session")
    grep -Eq "$1" <<<"$screen" && return 0
    sleep 0.1
  done
  fail "nothing matched '$1' on the terminal; screen was: $screen"
}

random_file "$WORK/in" 100000

# Ctrl-C at 80 columns: one progress line, then the status.
run_in_terminal 80 "'$RATELIMIT' --rate 10k --progress '$WORK/in' >/dev/null"
wait_for_screen 'avg .*%'
tmux send-keys -t "$session" C-c
wait_for_screen '^status=130'
[ "$(grep -c 'avg' <<<"$screen")" -eq 1 ] || fail "Ctrl-C left several progress lines: $screen"
[ "$(wc -L <<<"$(grep 'avg' <<<"$screen")")" -le 77 ] || fail "the line is wider than 77: $screen"

# 20 columns: no part cut in the middle ("1.00 GB [" was).
run_in_terminal 20 "'$RATELIMIT' --rate 10k --progress '$WORK/in' >/dev/null"
wait_for_screen 'B'
line=$(head -1 <<<"$screen")
grep -Eq '^[0-9.]+ [kM]?B( +[0-9]+%)?$' <<<"$line" || fail "at 20 columns the line is '$line'"
tmux send-keys -t "$session" C-c

# -l: a first line of 600 bytes and 99 short ones. Once the first line is out, 1% of the lines
# (not 75% of the bytes) is done, and the 99 left take about 99 s at 1 a second.
{
  head -c 599 /dev/zero | tr '\0' x
  echo
  for _ in $(seq 99); do echo y; done
} >"$WORK/lines"
run_in_terminal 100 "'$RATELIMIT' -l --rate 1/s --progress '$WORK/lines' >/dev/null"
wait_for_screen 'ETA'
grep -Eq '^[12] lines? 0:00:0[0-9] .* [12]% ETA 0:01:(3[6-9]|40)' <<<"$screen" ||
  fail "-l progress: $screen"
tmux send-keys -t "$session" C-c
exit 0
