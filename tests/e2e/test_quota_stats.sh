#!/usr/bin/env bash
# A pipe's quotas as users see them (issue 29): --stats and --stats=json report each quota (used in
# its window, N, period) and how long the quotas held the pipe, for a pipe's own bucket and a
# shared key; a pipe whose parameters replace a key's names the quotas on both sides.
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state

# 30 lines, 10 in any half second, at a rate that alone would take 0.3 s: the quota holds the pipe
# for about a second, and the progress line says so.
seq 30 >"$WORK/lines"
"$RATELIMIT" -l --rate 100/s --quota 10/500ms --stats --progress=force "$WORK/lines" >"$WORK/out" \
  2>"$WORK/stderr" || fail "the pipe failed: $(cat "$WORK/stderr")"
cmp "$WORK/lines" "$WORK/out" || fail "the lines differ"
grep -q ', held by a quota\]' "$WORK/stderr" || fail "the progress line never said: $(cat -v "$WORK/stderr")"
grep -Eq '^ratelimit: 30 lines in [0-9.]+ s, .*\(rate 100/s.*\), [0-9]+ bytes; held by quotas ([1-9][0-9.]*s|0\.[5-9][0-9]*s)$' \
  "$WORK/stderr" || fail "--stats: $(cat "$WORK/stderr")"
grep -Eq '^ratelimit: quota 10/500ms: ([1-9]|10) used in the window$' "$WORK/stderr" ||
  fail "--stats names no quota: $(cat "$WORK/stderr")"

# check_json FILE: the quota and the time held in the JSON summary.
check_json() {
  python3 -c '
import json, sys
summary = json.load(open(sys.argv[1]))
quotas = summary["quotas"]
assert len(quotas) == 1, quotas
assert quotas[0]["quota"] == "10/500ms" and quotas[0]["limit"] == 10, quotas
assert quotas[0]["period_seconds"] == 0.5 and 1 <= quotas[0]["used"] <= 10, quotas
assert summary["held_by_quotas_seconds"] >= 0.5, summary
' "$1" || fail "--stats=json: $(cat "$1")"
}
"$RATELIMIT" -l --rate 100/s --quota 10/500ms --stats=json "$WORK/lines" >/dev/null 2>"$WORK/json"
check_json "$WORK/json"
# A shared key's quotas are the key's, as the store keeps them.
"$RATELIMIT" -l --quota 10/500ms --key shared --stats=json "$WORK/lines" >/dev/null 2>"$WORK/json"
check_json "$WORK/json"

# Without quotas the summary says nothing of them.
"$RATELIMIT" -l --rate 1000/s --stats "$WORK/lines" >/dev/null 2>"$WORK/stderr"
[ "$(wc -l <"$WORK/stderr")" -eq 1 ] && ! grep -q quota "$WORK/stderr" ||
  fail "--stats without quotas: $(cat "$WORK/stderr")"
"$RATELIMIT" -l --rate 1000/s --stats=json "$WORK/lines" >/dev/null 2>"$WORK/json"
python3 -c '
import json, sys
summary = json.load(open(sys.argv[1]))
assert summary["quotas"] == [] and summary["held_by_quotas_seconds"] == 0, summary
' "$WORK/json" || fail "--stats=json without quotas: $(cat "$WORK/json")"

# A pipe that follows a key's settings names the quotas on both sides: those it would bring, and
# the key's that it keeps.
expect_status 0 "$RATELIMIT" acquire --rate 2/s --key replaced
seq 3 | "$RATELIMIT" -l --rate 100/s --quota 50/h --key replaced >/dev/null 2>"$WORK/stderr"
expect_stderr "ratelimit: key 'replaced' has rate 2/s, burst 1s: this call follows it, not its own rate 100/s, burst 1s, quota 50/h (to make them the key's: ratelimit set --key replaced --rate 100/s --quota 50/h)"
expect_status 0 "$RATELIMIT" set --key replaced --rate 100/s --quota 50/h
seq 3 | "$RATELIMIT" -l --rate 100/s --key replaced >/dev/null 2>"$WORK/stderr"
expect_stderr "ratelimit: key 'replaced' has rate 100/s, burst 1s, quota 50/h: this call follows it, not its own rate 100/s, burst 1s (to make them the key's: ratelimit set --key replaced --no-quota 1h)"
exit 0
