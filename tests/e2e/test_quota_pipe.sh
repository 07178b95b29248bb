#!/usr/bin/env bash
# --quota on a pipe without a rate: at most N bytes in any window of the period, byte-exact, and
# the quota's bad values are usage errors that name them.
# Timing: the windows are measured where the reader receives the data (RESOURCE_LOCK timing).
source "$E2E_LIB"
windows="python3 $(dirname "${BASH_SOURCE[0]}")/quota_windows.py"

expect_status 64 "$RATELIMIT" --quota 100k </dev/null
expect_stderr "ratelimit: --quota: invalid quota '100k': expected a period, e.g. 5000/h or 50GB/d"
expect_status 64 "$RATELIMIT" --quota 1.5/s </dev/null
expect_stderr "ratelimit: --quota: invalid quota '1.5/s': the amount must be a whole number of units, at least 1"
expect_status 64 "$RATELIMIT" --quota 0/h </dev/null
expect_status 64 "$RATELIMIT" --quota 10/x </dev/null
expect_status 64 "$RATELIMIT" -l --quota 10kB/s </dev/null
expect_status 64 "$RATELIMIT" --quota 10/s --chunk 11 </dev/null
expect_status 64 "$RATELIMIT" --quota 10/s --burst 1s </dev/null
expect_status 64 "$RATELIMIT" </dev/null

# An input that fills a quota exactly ends at once: its last chunk is no more than the input is
# known to hold once its writer has closed, on a key of the state file too.
for key in "" "--key exact"; do
  # shellcheck disable=SC2086 # the key's options, split
  head -c 100 /dev/zero | timeout 20 "$RATELIMIT" --quota 100/h $key --state-dir "$WORK/state" \
    >"$WORK/exact" || fail "100 bytes under --quota 100/h $key did not end in 20 s"
  [ "$(wc -c <"$WORK/exact")" -eq 100 ] || fail "100 bytes under --quota 100/h $key gave $(wc -c <"$WORK/exact")"
done

# An input that turns out empty, or ends short of a chunk, ends at once and whole.
printf '' | "$RATELIMIT" --quota 100/h >"$WORK/empty" || fail "an empty input under a quota failed"
[ ! -s "$WORK/empty" ] || fail "an empty input under a quota gave output"
printf abc | "$RATELIMIT" --quota 100/h >"$WORK/short" || fail "3 bytes under a quota failed"
[ "$(cat "$WORK/short")" = abc ] || fail "3 bytes under a quota gave '$(cat "$WORK/short")'"

# 350 kB at 100 kB in any 2 s: three full windows and a half, in about 6 s.
random_file "$WORK/in" 350000
start=$(now_ns)
$windows read "$WORK/out" "$WORK/reads" bytes "$RATELIMIT" --quota 100k/2s "$WORK/in"
ms=$(ms_since "$start")
cmp "$WORK/in" "$WORK/out" || fail "the output differs from the input"
busiest=$($windows busiest 2 "$WORK/reads")
[ "$busiest" -le 100000 ] || fail "$busiest bytes in one 2 s window, quota 100000"
[ "$busiest" -ge 90000 ] || fail "only $busiest bytes in the busiest 2 s window: the quota idles"
[ "$ms" -ge 6000 ] && [ "$ms" -le 9000 ] || fail "350 kB at 100 kB/2s took $ms ms, expected 6.0-9.0 s"

# Lines: at most 20 in any second, beside a rate of 100/s.
seq 50 >"$WORK/lines"
$windows read "$WORK/out" "$WORK/reads" lines "$RATELIMIT" -l --rate 100/s --quota 20/s "$WORK/lines"
cmp "$WORK/lines" "$WORK/out" || fail "the lines differ"
busiest=$($windows busiest 1 "$WORK/reads")
[ "$busiest" -le 20 ] || fail "$busiest lines in one second, quota 20"
