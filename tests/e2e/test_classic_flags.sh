#!/usr/bin/env bash
# Timing checks: run alone (RESOURCE_LOCK timing).
# --start-full and --pay-first on acquire, exec and pipes, in the state file, and on a key whose
# callers disagree about them. Timing is only checked from below (a wait cannot be shorter on a
# busy machine), with generous upper bounds.
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state

# One line, exit 64: a warming-up bucket already starts full, of cold permits.
expect_status 64 "$RATELIMIT" acquire --rate 1/s --warmup 2s --start-full
expect_stderr "ratelimit: --warmup excludes --start-full"
expect_status 64 "$RATELIMIT" --rate 1k --warmup 2s --start-full </dev/null
expect_stderr "ratelimit: --warmup excludes --start-full"

# The classic bucket on exec: the burst of 2 at once, then refused.
classic=(--rate 1/s --burst 2 --start-full --pay-first)
expect_status 0 "$RATELIMIT" exec --key e "${classic[@]}" --try -- touch "$WORK/e1"
expect_status 0 "$RATELIMIT" exec --key e "${classic[@]}" --try -- touch "$WORK/e2"
expect_status 75 "$RATELIMIT" exec --key e "${classic[@]}" --try -- touch "$WORK/e3"
[ -e "$WORK/e2" ] && [ ! -e "$WORK/e3" ] || fail "exec --start-full --pay-first ran the wrong commands"

# --permits above the burst (2 at 2/s): a try is refused even on a full bucket; without --try the
# request waits for the 3 missing permits, 1.5 s, and leaves no debt but no token either.
big=(--rate 2/s --burst 2 --start-full --pay-first --permits 5)
expect_status 75 "$RATELIMIT" acquire --key big "${big[@]}" --try
expect_status 75 "$RATELIMIT" acquire --key big "${big[@]}" --timeout 1s
start=$(now_ns)
expect_status 0 "$RATELIMIT" acquire --key big "${big[@]}"
ms=$(ms_since "$start")
[ "$ms" -ge 1450 ] && [ "$ms" -lt 4000 ] || fail "--permits 5 over a burst of 2 at 2/s waited ${ms} ms, expected 1.5 s"
expect_status 75 "$RATELIMIT" acquire --key big --rate 2/s --burst 2 --start-full --pay-first --try
# Guava's way: granted at once on debt, and the next caller pays for it.
expect_status 0 "$RATELIMIT" acquire --key guava --rate 2/s --burst 2 --start-full --permits 5 --try
expect_status 75 "$RATELIMIT" acquire --key guava --rate 2/s --burst 2 --start-full --try

# One key, two callers that disagree: A, which made the key, pays first; B would pay later
# (Guava), but follows the key's flags and says so. From the bucket's creation (3 stored, 1/s) A
# takes 3; then neither takes one on debt, and A's next goes once its token exists, 1 s after.
a=(--key mixed --rate 1/s --burst 3 --start-full --pay-first)
b=(--key mixed --rate 1/s --burst 3)
start=$(now_ns)
expect_status 0 "$RATELIMIT" acquire "${a[@]}" --permits 3 --try
expect_status 75 "$RATELIMIT" acquire "${a[@]}" --try
expect_status 75 "$RATELIMIT" acquire "${b[@]}" --try
expect_stderr "ratelimit: key 'mixed' has rate 1/s, burst 3, start-full, pay-first: this call follows it, not its own rate 1/s, burst 3 (to make them the key's: ratelimit reset --key mixed, then run again)"
expect_status 0 "$RATELIMIT" acquire "${a[@]}" --timeout 5s
ms=$(ms_since "$start")
[ "$ms" -ge 950 ] && [ "$ms" -lt 5000 ] ||
  fail "the paying-first caller got its token ${ms} ms after the bucket was made, expected 1 s"

# --start-full counts for the call that makes the bucket: not on a key another caller made
# empty, and again after reset.
expect_status 0 "$RATELIMIT" acquire --key made --rate 1/m --burst 3
expect_status 75 "$RATELIMIT" acquire --key made --rate 1/m --burst 3 --start-full --pay-first --try
expect_status 0 "$RATELIMIT" reset --key made
expect_status 0 "$RATELIMIT" acquire --key made --rate 1/m --burst 3 --start-full --pay-first \
  --permits 3 --try

# A record of version 1 (before the flags) is a fresh bucket, full when asked, and says why.
{
  printf 'RLBUCKET\001\000\000\000'
  head -c 96 /dev/zero
} >"$RATELIMIT_STATE_DIR/old.bucket"
chmod 600 "$RATELIMIT_STATE_DIR/old.bucket"
expect_status 0 "$RATELIMIT" acquire --key old --rate 1/m --burst 3 --start-full --pay-first \
  --permits 3 --try --verbose
expect_stderr "ratelimit: key 'old': record version 1, expected 9; starting a fresh bucket"
# The record keeps the flags the key was made with, whatever a later call says; status shows them.
"$RATELIMIT" status --key old >"$WORK/status"
grep -q '^old .* burst 3 start-full pay-first ' "$WORK/status" || fail "status shows $(cat "$WORK/status")"
expect_status 75 "$RATELIMIT" acquire --key old --rate 1/m --burst 3 --pay-first --try
"$RATELIMIT" status --key old >"$WORK/status"
grep -q '^old .* burst 3 start-full pay-first ' "$WORK/status" || fail "status shows $(cat "$WORK/status")"

# Pipes. Paying first, even a single line waits for its permit (Guava's goes at once).
start=$(now_ns)
printf 'one\n' | "$RATELIMIT" -l --rate 5 --pay-first >"$WORK/line"
ms=$(ms_since "$start")
[ "$(cat "$WORK/line")" = one ] || fail "pipe --pay-first wrote '$(cat "$WORK/line")'"
[ "$ms" -ge 190 ] || fail "a line at 5/s paying first came after ${ms} ms, expected 200 ms"

# 3000 bytes at 1000/s with a burst of 1000: starting full, the first 1000 go at once and the rest
# take 2 s (Guava's empty start: 3 s); through a pipe (zero copy) and from a file (read/write).
random_file "$WORK/in" 3000
for path in pipe file; do
  start=$(now_ns)
  if [ $path = pipe ]; then
    cat "$WORK/in" | "$RATELIMIT" --rate 1000 --burst 1000 --start-full --pay-first | cat >"$WORK/out"
  else
    "$RATELIMIT" --rate 1000 --burst 1000 --start-full --pay-first "$WORK/in" -o "$WORK/out"
  fi
  ms=$(ms_since "$start")
  cmp -s "$WORK/in" "$WORK/out" || fail "the $path output differs from its input"
  [ "$ms" -ge 1950 ] && [ "$ms" -lt 2800 ] ||
    fail "3000 bytes through a $path at 1000/s starting with 1000 took ${ms} ms, expected 2 s"
done
