#!/usr/bin/env bash
# status lists the buckets, reset forgets one, and new parameters apply from the next call on.
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state

"$RATELIMIT" acquire --rate 2/s --key api
"$RATELIMIT" acquire --rate 100/m --key mail --warmup 10s
expect_status 0 "$RATELIMIT" status
status=$("$RATELIMIT" status)
grep -Eq '^api +2/s +burst 1s +0\.00 +in 0\.[0-9]{1,3}s$' <<<"$status" || fail "status: $status"
grep -Eq '^mail +100/m +warmup 10s x3 ' <<<"$status" || fail "status: $status"
[ "$("$RATELIMIT" status --key api | wc -l)" -eq 2 ] || fail "status --key shows other buckets"
# A booking at a vanishing rate is shown as such, not as billions of seconds.
"$RATELIMIT" acquire --rate 1e-300 --key glacial
"$RATELIMIT" acquire --rate 1e-300 --key glacial --try || true
"$RATELIMIT" status --key glacial | grep -Eq '^glacial .* in over 100 years$' ||
  fail "status of a glacial bucket: $("$RATELIMIT" status --key glacial)"
expect_status 66 "$RATELIMIT" status --key nosuch
grep -q "no bucket 'nosuch'" "$WORK/stderr" || fail "status of a missing key: $(cat "$WORK/stderr")"

# A key booked a minute ahead refuses a --try until reset forgets it (a minute: a loaded machine
# may take seconds between two commands).
"$RATELIMIT" acquire --rate 1/m --key api
expect_status 75 "$RATELIMIT" acquire --rate 1/m --key api --try
expect_status 0 "$RATELIMIT" reset --key api
expect_status 66 "$RATELIMIT" status --key api
expect_status 0 "$RATELIMIT" acquire --rate 1/m --key api --try
expect_status 66 "$RATELIMIT" reset --key never-used

# Parameters changed between calls: a caller's own do not change the key (the next waits the 2 s
# booked at 0.5/s and says so); set --key does, and its 20/s applies at once (the turn booked at
# 0.5/s brought nearer).
"$RATELIMIT" acquire --rate 0.5/s --key p
start=$(now_ns)
expect_status 0 "$RATELIMIT" acquire --rate 20/s --burst 0 --key p
ms=$(ms_since "$start")
[ "$ms" -ge 1800 ] && [ "$ms" -lt 4000 ] || fail "a caller with another rate took ${ms} ms, expected about 2000"
grep -q "^ratelimit: key 'p' has rate 30/m, burst 0.5: this call follows it" "$WORK/stderr" ||
  fail "the caller that followed the key said: $(cat "$WORK/stderr")"
expect_status 0 "$RATELIMIT" set --key p --rate 20/s --burst 0
start=$(now_ns)
for _ in $(seq 5); do "$RATELIMIT" acquire --rate 20/s --burst 0 --key p; done
ms=$(ms_since "$start")
[ "$ms" -lt 1500 ] || fail "after set --key 5 acquires at 20/s took ${ms} ms"
"$RATELIMIT" status --key p | grep -Eq '^p +20/s +burst 0s ' || fail "status does not show the new rate"
