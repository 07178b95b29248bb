#!/usr/bin/env bash
# A key owns its limits (issue 39), in the state file and in Redis through the host agent alike:
# the first caller of a new key or `set --key` sets them; a caller with other flags follows the
# key and is told once how to change it; an option left out changes nothing (omitting --quota
# keeps the budget); two callers with different rates do not flip the key; `set --key` sticks
# under a running loop and changes any setting, quotas included (--no-quota removes one);
# exec/acquire/pipes without --rate follow an existing key and exit 64 with a hint on a new one;
# reset forgets the key; in Redis a key set by hand outlives its bucket's idle expiry.
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
start_redis main

# key_owns_settings STORE_OPTION...: the story above, with the keys in that store.
key_owns_settings() {
  # Omitting --quota keeps the key's budget: the caller follows it, told once, and the key still
  # refuses the 4th permit of the hour.
  expect_status 0 "$RATELIMIT" acquire "$@" --key b --rate 100/s --quota 3/1h
  expect_stderr ""
  expect_status 0 "$RATELIMIT" acquire "$@" --key b --rate 100/s
  expect_stderr "ratelimit: key 'b' has rate 100/s, burst 1s, quota 3/h: this call follows it, not its own rate 100/s, burst 1s (to make them the key's: ratelimit set --key b --no-quota 1h)"
  expect_status 0 "$RATELIMIT" acquire "$@" --key b --rate 100/s
  expect_stderr ""
  expect_status 75 "$RATELIMIT" acquire "$@" --key b --rate 100/s --try
  "$RATELIMIT" status "$@" --key b >"$WORK/status"
  grep -q "b: quota 3/h: 3 used in the window" "$WORK/status" ||
    fail "the key lost its quota: $(cat "$WORK/status")"

  # Two hosts' scripts with different rates: the key keeps the first's, 30 calls print one notice.
  for i in $(seq 15); do
    "$RATELIMIT" acquire "$@" --key flip --rate 1000/s 2>>"$WORK/flip.err"
    "$RATELIMIT" acquire "$@" --key flip --rate 500/s 2>>"$WORK/flip.err"
  done
  [ "$(wc -l <"$WORK/flip.err")" -eq 1 ] || fail "30 calls printed: $(cat "$WORK/flip.err")"
  grep -qx "ratelimit: key 'flip' has rate 1k/s, burst 1s: this call follows it, not its own rate 500/s, burst 1s (to make them the key's: ratelimit set --key flip --rate 500/s)" \
    "$WORK/flip.err" || fail "the notice: $(cat "$WORK/flip.err")"
  rm "$WORK/flip.err"
  grep -Eq "^flip +1k/s " <<<"$("$RATELIMIT" status "$@" --key flip)" ||
    fail "the key flipped: $("$RATELIMIT" status "$@" --key flip)"

  # set --key sticks under a running loop at 100/s: the loop follows 2/s from its next call on,
  # told once; 3 calls after the set take a second at least (two turns of 0.5 s).
  rm -f "$WORK/loop.err" "$WORK/loop.count"
  (
    for i in $(seq 40); do
      "$RATELIMIT" exec "$@" --key api --rate 100/s -- true 2>>"$WORK/loop.err"
      echo "$i" >>"$WORK/loop.count"
    done
  ) &
  local loop=$!
  until [ "$(wc -l <"$WORK/loop.count" 2>/dev/null || echo 0)" -ge 5 ]; do sleep 0.01; done
  expect_status 0 "$RATELIMIT" set "$@" --key api --rate 2/s
  expect_stderr "ratelimit: key 'api' now at 2/s (was 100/s)"
  local start ms
  start=$(now_ns)
  for _ in 1 2 3; do "$RATELIMIT" exec "$@" --key api --rate 100/s -- true 2>>"$WORK/loop.err"; done
  ms=$(ms_since "$start")
  kill "$loop" 2>/dev/null || true
  wait "$loop" 2>/dev/null || true
  [ "$ms" -ge 900 ] || fail "3 calls after set --key api --rate 2/s took ${ms} ms: the loop put 100/s back"
  grep -Eq "^api +2/s " <<<"$("$RATELIMIT" status "$@" --key api)" ||
    fail "set did not stick: $("$RATELIMIT" status "$@" --key api)"
  [ "$(grep -c "this call follows it" "$WORK/loop.err")" -eq 1 ] ||
    fail "the loop was told: $(cat "$WORK/loop.err")"
  grep -q "^ratelimit: key 'api' has rate 2/s, burst 1s: this call follows it, not its own rate 100/s, burst 1s (to make them the key's: ratelimit set --key api --rate 100/s)$" \
    "$WORK/loop.err" || fail "the loop's notice: $(cat "$WORK/loop.err")"

  # Without --rate: a new key is refused with a hint, an existing one is followed silently.
  expect_status 64 "$RATELIMIT" acquire "$@" --key nosuch
  grep -q "^ratelimit: no --rate, and key 'nosuch' has no bucket in .* to follow: give --rate (e.g. --rate 2/s), or make the key first (ratelimit set --key nosuch --rate 2/s)$" \
    "$WORK/stderr" || fail "acquire without --rate on a new key said: $(cat "$WORK/stderr")"
  expect_status 64 "$RATELIMIT" exec "$@" --key nosuch -- true
  start=$(now_ns)
  for _ in 1 2 3; do expect_status 0 "$RATELIMIT" acquire "$@" --key api; done
  expect_status 0 "$RATELIMIT" exec "$@" --key api -- true
  expect_stderr ""
  ms=$(ms_since "$start")
  [ "$ms" -ge 1400 ] || fail "4 calls following 2/s took ${ms} ms"
  echo hello | "$RATELIMIT" "$@" --key flip >"$WORK/piped" 2>"$WORK/stderr" ||
    fail "a pipe following the key failed: $(cat "$WORK/stderr")"
  expect_stderr ""
  [ "$(cat "$WORK/piped")" = hello ] || fail "the pipe following the key wrote: $(cat "$WORK/piped")"

  # A caller without --rate moves a key's timetable on past a change, as one that gives it does.
  boundary_in 2
  expect_status 0 "$RATELIMIT" set "$@" --key tt --rate "$before,2/s $at,50/s"
  expect_status 0 "$RATELIMIT" acquire "$@" --key tt
  until [ "$(date +%s)" -ge "$boundary" ]; do sleep 0.05; done
  expect_status 0 "$RATELIMIT" acquire "$@" --key tt --timeout 2s
  grep -Eq "^tt +50/s " <<<"$("$RATELIMIT" status "$@" --key tt)" ||
    fail "the key did not move on: $("$RATELIMIT" status "$@" --key tt)"
  unset TZ

  # set --key changes any setting, a left-out one stays; --no-quota removes one; a new key is made.
  expect_status 0 "$RATELIMIT" set "$@" --key b --burst 2s --quota 5/1h --quota 100/1d
  expect_stderr "ratelimit: key 'b' now has rate 100/s, burst 2s, quota 5/h, quota 100/d (was rate 100/s, burst 1s, quota 3/h)"
  expect_status 0 "$RATELIMIT" acquire "$@" --key b --rate 100/s --try
  expect_status 0 "$RATELIMIT" set "$@" --key b --no-quota 1h
  expect_stderr "ratelimit: key 'b' now has rate 100/s, burst 2s, quota 100/d (was rate 100/s, burst 2s, quota 5/h, quota 100/d)"
  # --start-full and --pay-first turn on, and their --no- forms off again.
  expect_status 0 "$RATELIMIT" set "$@" --key b --start-full --pay-first
  expect_stderr "ratelimit: key 'b' now has rate 100/s, burst 2s, start-full, pay-first, quota 100/d (was rate 100/s, burst 2s, quota 100/d)"
  expect_status 0 "$RATELIMIT" set "$@" --key b --no-start-full --no-pay-first
  expect_stderr "ratelimit: key 'b' now has rate 100/s, burst 2s, quota 100/d (was rate 100/s, burst 2s, start-full, pay-first, quota 100/d)"
  expect_status 64 "$RATELIMIT" set "$@" --key b --pay-first --no-pay-first
  expect_status 0 "$RATELIMIT" set "$@" --key made --rate 3/s --quota 2/h
  expect_stderr "ratelimit: key 'made' now has rate 3/s, burst 1s, quota 2/h (a new key)"
  expect_status 0 "$RATELIMIT" acquire "$@" --key made
  expect_status 0 "$RATELIMIT" acquire "$@" --key made
  # Refused by the quota: the rate alone would grant it within a second.
  expect_status 75 "$RATELIMIT" acquire "$@" --key made --timeout 2s
  expect_status 64 "$RATELIMIT" set "$@" --key made --no-quota fortnight

  # reset forgets the key: the next caller makes it anew, told nothing.
  expect_status 0 "$RATELIMIT" reset "$@" --key b
  expect_status 0 "$RATELIMIT" acquire "$@" --key b --rate 7/s
  expect_stderr ""
  grep -Eq "^b +7/s " <<<"$("$RATELIMIT" status "$@" --key b)" ||
    fail "reset kept the key: $("$RATELIMIT" status "$@" --key b)"
}

key_owns_settings --state-dir "$WORK/files"
key_owns_settings --redis "unix://$WORK/main/sock"

# In Redis a key whose settings all its callers share vanishes once idle (its bucket's expiry, a
# few seconds here); one set by hand, or whose callers differ, is kept for a week after its last
# call, so that its settings outlive its bucket.
ttl_of() { redis_cli main pttl "ratelimit:{$1}"; }
[ "$(ttl_of flip)" -gt $((6 * 86400 * 1000)) ] || fail "a key that told a caller expires in $(ttl_of flip) ms"
[ "$(ttl_of api)" -gt $((6 * 86400 * 1000)) ] || fail "a key set by hand expires in $(ttl_of api) ms"
[ "$(ttl_of b)" -lt 10000 ] || fail "a key nobody differs on expires in $(ttl_of b) ms"
exit 0
