#!/usr/bin/env bash
# The progress line in a real terminal (tmux), its absence when standard error is not a terminal,
# and the --stats summary.
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"

random_file "$WORK/in" 60000

session="ratelimit-e2e-$$"
trap 'tmux kill-session -t "$session" 2>/dev/null || true; rm -rf "$WORK"' EXIT
tmux new-session -d -s "$session" -x 160 -y 10 \
  "'$RATELIMIT' --rate 20k --progress '$WORK/in' >'$WORK/out'; echo status=\$?; sleep 30"

# While it runs: amount, elapsed time, current and average rate, bar, percentage and ETA.
line_pattern='^[0-9.]+ [kM]?B 0:00:0[0-9] \[[0-9. ]+[kM]?B/s\] \[avg [0-9. ]+[kM]?B/s\] \[=*>? *\] +[0-9]+% ETA 0:00:0[0-9]'
seen=""
for _ in $(seq 40); do
  sleep 0.1
  screen=$(tmux capture-pane -p -t "$session")
  if grep -Eq "$line_pattern" <<<"$screen"; then
    seen=$(grep -E "$line_pattern" <<<"$screen")
    break
  fi
done
[ -n "$seen" ] || fail "no progress line on the terminal; screen was: $screen"
# One line, redrawn in place: never more than one progress line on the screen.
[ "$(grep -c 'avg' <<<"$screen")" -eq 1 ] || fail "progress drew several lines: $screen"

for _ in $(seq 60); do
  screen=$(tmux capture-pane -p -t "$session")
  grep -q 'status=' <<<"$screen" && break
  sleep 0.1
done
grep -q 'status=0' <<<"$screen" || fail "no clean exit; screen was: $screen"
grep -Eq '^60\.0 kB 0:00:0[2-5] .*\[=+\] 100%' <<<"$screen" || fail "final line wrong: $screen"
cmp "$WORK/in" "$WORK/out"

# An 80-column terminal: the line fits in 79 columns (no trail of wrapped redraws), in the
# units the rate was written in; after the window shrinks (SIGWINCH) it fits the new width.
narrow="$session-narrow"
trap 'tmux kill-session -t "$session" 2>/dev/null || true; tmux kill-session -t "$narrow" 2>/dev/null || true; rm -rf "$WORK"' EXIT
tmux new-session -d -s "$narrow" -x 80 -y 10 \
  "'$RATELIMIT' --rate 20KiB/s --progress '$WORK/in' >/dev/null; sleep 30"
wait_for_line() {  # wait_for_line PATTERN: the screen once a line matches it
  for _ in $(seq 40); do
    sleep 0.1
    screen=$(tmux capture-pane -p -t "$narrow")
    grep -Eq "$1" <<<"$screen" && return 0
  done
  fail "no line matching '$1'; screen was: $screen"
}
wait_for_line 'KiB/s\] \[avg [0-9. ]+KiB/s\] \[=*>? *\] +[0-9]+% ETA'
[ "$(grep -c . <<<"$screen")" -eq 1 ] || fail "the progress line wrapped at 80 columns: $screen"
[ "$(awk '{ print length }' <<<"$screen" | sort -n | tail -1)" -le 79 ] || fail "longer than 79 columns: $screen"
tmux resize-window -t "$narrow" -x 40 2>/dev/null || tmux resize-pane -t "$narrow" -x 40
sleep 0.5
screen=$(tmux capture-pane -p -t "$narrow")
[ "$(grep -c . <<<"$screen")" -eq 1 ] || fail "the progress line wrapped at 40 columns: $screen"
grep -Eq '^[0-9.]+ KiB .*KiB/s\]' <<<"$screen" || fail "at 40 columns: $screen"

# Not a terminal: no progress unless forced; forced output is redrawn with carriage returns.
"$RATELIMIT" --rate 1M --progress "$WORK/in" >/dev/null 2>"$WORK/stderr"
[ ! -s "$WORK/stderr" ] || fail "progress drawn on a non-terminal: $(cat "$WORK/stderr")"
"$RATELIMIT" --rate 200k --progress=force "$WORK/in" >/dev/null 2>"$WORK/stderr"
grep -q $'\r' "$WORK/stderr" || fail "--progress=force drew nothing"
# At most 10 redraws per second: 0.3 s of transfer (longer under load) gives a handful, where a
# redraw per chunk would give 60.
start=$(now_ns)
"$RATELIMIT" --rate 200k --progress=force "$WORK/in" >/dev/null 2>"$WORK/stderr"
elapsed_ms=$(ms_since "$start")
redraws=$(tr '\r' '\n' <"$WORK/stderr" | grep -c avg)
[ "$redraws" -le $((elapsed_ms / 100 + 2)) ] || fail "$redraws redraws in $elapsed_ms ms"

# --stats: one line; --stats=json: one JSON object.
"$RATELIMIT" --rate 1M --stats "$WORK/in" >/dev/null 2>"$WORK/stderr"
# Load can stretch the 55 ms: the average may then show in kB/s.
grep -Eq '^ratelimit: 60000 bytes in [0-9]+\.[0-9]{3} s, [0-9.]+ [kM]B/s \(rate 1MB/s(; the first chunk is free)?\)$' "$WORK/stderr" ||
  fail "--stats: $(cat "$WORK/stderr")"
seq 100 | "$RATELIMIT" -l --rate 1000 --stats=json >/dev/null 2>"$WORK/stderr"
grep -Eq '^\{"unit":"lines","units":100,"bytes":292,"seconds":0\.[0-9]+,"average_rate":[0-9.]+,"rate":1000,"rate_text":"1k/s","average_above_rate":(true|false),"ending":"end_of_input","rate_changes":\[\],"quotas":\[\],"held_by_quotas_seconds":0\}$' \
  "$WORK/stderr" || fail "--stats=json: $(cat "$WORK/stderr")"
