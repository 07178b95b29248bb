#!/usr/bin/env bash
# Soak: 16 shell loops take permits from one shared bucket while random ones are killed with
# SIGKILL at any point (waiting, holding the lock, writing the record). No record is ever torn
# (--verbose would say "starting a fresh bucket"), the grants never exceed the rate plus one
# burst, and everything ends in bounded time. Timing: an upper bound only (load can only lower
# the grants); run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state
key=soak-$$
rate=40

# The loops run until the killer has killed 40 processes (at most 30 s: a loaded machine kills
# fewer a second).
start=$(now_ns)
for loop in $(seq 16); do
  (
    while [ ! -e "$WORK/stop" ]; do
      if "$RATELIMIT" acquire --rate "$rate/s" --key "$key" --timeout 2s --verbose 2>>"$WORK/stderr.$loop"; then
        now_ns >>"$WORK/grants.$loop"
      fi
    done
  ) &
done
loops=$(jobs -p)

kills=0
deadline=$((start + 30000000000))
while [ "$kills" -lt 40 ] && [ "$(now_ns)" -lt "$deadline" ]; do
  mapfile -t pids < <(pgrep -f -- "--key $key" || true)
  if [ "${#pids[@]}" -gt 0 ]; then
    kill -KILL "${pids[RANDOM % ${#pids[@]}]}" 2>/dev/null && kills=$((kills + 1))
  fi
  sleep "0.0$((RANDOM % 5 + 1))"
done
touch "$WORK/stop"
# Every loop ends by itself: an acquire waits at most its --timeout.
for pid in $loops; do
  timeout_at=$(($(now_ns) + 10000000000))
  while kill -0 "$pid" 2>/dev/null; do
    [ "$(now_ns)" -lt "$timeout_at" ] || fail "a loop did not end within 10 s of the stop"
    sleep 0.05
  done
done
wait

cat "$WORK"/stderr.* >"$WORK/all_stderr" 2>/dev/null || true
! grep -q "fresh bucket" "$WORK/all_stderr" || fail "a record was discarded: $(sort -u "$WORK/all_stderr")"
grants=$(cat "$WORK"/grants.* 2>/dev/null | wc -l)
last=$(cat "$WORK"/grants.* | sort -n | tail -1)
elapsed_ms=$(((last - start) / 1000000))
# The bucket starts empty and stores at most one second of permits; the first grant is free.
most=$((rate * elapsed_ms / 1000 + rate + 1))
[ "$kills" -ge 10 ] || fail "only $kills processes were killed"
[ "$grants" -ge 10 ] || fail "only $grants grants in $elapsed_ms ms"
[ "$grants" -le "$most" ] || fail "$grants grants in $elapsed_ms ms at $rate/s (at most $most)"
expect_status 0 "$RATELIMIT" status --key "$key" --verbose
! grep -q "problem\|discarded\|corrupt" "$WORK/stderr" || fail "the record is unusable: $(cat "$WORK/stderr")"
echo "soak: $grants grants, $kills kills, $elapsed_ms ms" >&2
