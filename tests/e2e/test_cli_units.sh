#!/usr/bin/env bash
# Rates and sizes as people type them, one rule for --rate and --burst on every command, and the
# surprises refused or named: a lowercase b, an overflowing number, a rate that looks like a hang.
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state

expect_status 64 "$RATELIMIT" --rate 5kb </dev/null
expect_stderr "ratelimit: --rate: invalid rate '5kb': 'b' could mean bytes or bits: write 5kB for bytes or 5kbit for bits"

for rate in 8Mbps 5MiBps 10MB/sec 600/min 16kbit/s; do
  [ "$(echo hello | "$RATELIMIT" --rate "$rate" 2>"$WORK/stderr")" = hello ] ||
    fail "--rate $rate refused: $(cat "$WORK/stderr")"
done

expect_status 64 "$RATELIMIT" --rate 1e400 </dev/null
expect_stderr "ratelimit: --rate: invalid rate '1e400': too large"

# The first unit passes at once (the bucket's first permit is free); the warning comes first.
echo x | timeout 1 "$RATELIMIT" --rate 1e-9 >/dev/null 2>"$WORK/stderr" || true
[ "$(head -n1 "$WORK/stderr")" = "ratelimit: warning: at rate '1e-9' one unit takes 31.7 years" ] ||
  fail "no warning for --rate 1e-9: $(cat "$WORK/stderr")"
expect_status 0 "$RATELIMIT" acquire --rate 1/h --key slow
grep -q "one unit takes 1h" "$WORK/stderr" && fail "warned at exactly one hour"

expect_status 64 "$RATELIMIT" acquire --rate 5 --burst 5MB --key units
expect_stderr "ratelimit: burst '5MB' is in bytes or bits, but this command counts permits: write it without B/bit"
expect_status 64 "$RATELIMIT" acquire --rate 5MB --key units
expect_stderr "ratelimit: rate '5MB' is in bytes or bits, but this command counts permits: write it without B/bit"
expect_status 0 "$RATELIMIT" acquire --rate 5 --burst 2min --key units
