#!/usr/bin/env bash
# One limit through outages: Redis away past the restart budget mid-pipe (the pipe comes back to
# the key), dropped connections (CLIENT KILL: no outage at all), a server out of memory (one line
# each way, not a flap), and a fleet's bound under --on-redis-error=local:N%.
# test_redis_outage_no_agent.sh runs it with --no-agent.
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"

# sample_key NAME KEY FILE: every 50 ms until killed, "now_ns free_ns" of the key (empty when the
# key or the server is not there).
sample_key() {
  while true; do
    echo "$(now_ns) $(redis-cli -s "$WORK/$1/sock" hget "ratelimit:{$2}" free_ns 2>/dev/null)" >>"$3"
    sleep 0.05
  done
}

# A share is a percentage above 0 and at most 100, refused before anything runs.
for share in 0% 101% 25 x%; do
  expect_status 64 "$RATELIMIT" acquire --rate 5/s --key k --on-redis-error "local:$share"
  expect_stderr "ratelimit: --on-redis-error: invalid value 'local:$share': expected local:N% with N above 0 and at most 100 (this host's share of the key's rate), e.g. local:25%"
done

# 1. Killed at 2 s, started again at 9 s (away past the 5 s restart budget), under `local`: the
# pipe books from the key again within 2 s of the restart, the output is the input, and it says
# so: one line out, one line back.
start_redis restart
seq 1200 >"$WORK/lines"
"$RATELIMIT" -l --rate 100 --key fk --redis "unix://$WORK/restart/sock" --on-redis-error local \
  <"$WORK/lines" >"$WORK/restart.out" 2>"$WORK/restart.err" &
pipe=$!
sleep 2
stop_redis restart KILL
sleep 7
start_redis_again restart
restarted=$(now_ns)
sample_key restart fk "$WORK/restart.samples" &
sampler=$!
status=0
wait $pipe || status=$?
kill $sampler
[ "$status" -eq 0 ] || fail "the pipe across a restart exited $status: $(cat "$WORK/restart.err")"
cmp "$WORK/lines" "$WORK/restart.out" || fail "the pipe across a restart: output differs"
sock=unix://$WORK/restart/sock
[ "$(wc -l <"$WORK/restart.err")" -eq 2 ] &&
  grep -qx "ratelimit: Redis at $sock: .*; using this host's bucket 'fk' (--on-redis-error=local)" \
    "$WORK/restart.err" &&
  grep -qx "ratelimit: Redis at $sock answers again; back on the shared bucket 'fk' (--on-redis-error=local)" \
    "$WORK/restart.err" || fail "the pipe across a restart said: $(cat "$WORK/restart.err")"
# The first sample of the key after the restart, and the key's moment moving on after it.
awk -v restarted="$restarted" '$2 != "" && $1 > restarted { print; n++ } n == 3 { exit }' \
  "$WORK/restart.samples" >"$WORK/restart.moving"
[ "$(wc -l <"$WORK/restart.moving")" -eq 3 ] || fail "the key was never written after the restart"
back_ms=$(awk -v restarted="$restarted" 'NR == 1 { printf "%d", ($1 - restarted) / 1e6 }' "$WORK/restart.moving")
[ "$back_ms" -lt 2000 ] || fail "the pipe came back to the key ${back_ms} ms after the restart"
[ "$(cut -d' ' -f2 "$WORK/restart.moving" | sort -u | wc -l)" -ge 2 ] ||
  fail "the key's fields did not move after the return: $(cat "$WORK/restart.moving")"

# 2. CLIENT KILL TYPE normal every 200 ms, policy fail (the default): a dropped connection is not
# an outage. A pipe, an exec loop and an acquire loop go on, within rate x time + burst.
start_redis kill
export RATELIMIT_REDIS=unix://$WORK/kill/sock
export RATELIMIT_STATE_DIR=$WORK/state
(while true; do redis_cli kill client kill type normal >/dev/null 2>&1; sleep 0.2; done) &
killer=$!
seq 3000 >"$WORK/ck.in"
start=$(now_ns)
expect_status 0 "$RATELIMIT" -v -l --rate 1000 --key ck <"$WORK/ck.in" >"$WORK/ck.out"
ms=$(ms_since "$start")
cmp "$WORK/ck.in" "$WORK/ck.out" || fail "the pipe under CLIENT KILL: output differs"
# -v says each connection made again; nothing else is said.
reconnects=$(grep -c "^ratelimit: Redis at $RATELIMIT_REDIS: .*; \(connecting\|sending the request\) again$" "$WORK/stderr")
[ "$reconnects" -ge 5 ] && [ "$reconnects" -eq "$(wc -l <"$WORK/stderr")" ] ||
  fail "the pipe under CLIENT KILL said: $(cat "$WORK/stderr")"
# 3000 lines at 1000/s, burst 1 s: at least 2 s.
[ "$ms" -ge 2000 ] && [ "$ms" -lt 10000 ] || fail "3000 lines at 1000/s took ${ms} ms"
for command in exec acquire; do
  : >"$WORK/starts.$command"
  start=$(now_ns)
  for _ in $(seq 30); do
    if [ $command = exec ]; then
      expect_status 0 "$RATELIMIT" exec --rate 20/s --key "loop-$command" -- true
    else
      expect_status 0 "$RATELIMIT" acquire --rate 20/s --key "loop-$command"
    fi
    [ ! -s "$WORK/stderr" ] || fail "$command under CLIENT KILL said: $(cat "$WORK/stderr")"
  done
  ms=$(ms_since "$start")
  # 30 grants at 20/s, burst 1 s, the first one free: no sooner than (30 - 1 - 20) / 20 s.
  [ "$ms" -ge 450 ] && [ "$ms" -lt 6000 ] || fail "30 ${command}s at 20/s took ${ms} ms"
done
kill $killer

# 3. Out of memory (maxmemory 1mb, noeviction) under `local`: the server answers PING and refuses
# the script. One line when the pipe leaves the key, none while PING answers and the script is
# still refused, one line when a decision on the key succeeds again (maxmemory lifted at 3 s).
start_redis oom --maxmemory 1mb --maxmemory-policy noeviction
# Filled past its bound (DEBUG POPULATE is exempt from it), so that every write is refused.
redis_cli oom debug populate 20000 filler 100 >/dev/null
oom=unix://$WORK/oom/sock
seq 600 >"$WORK/oom.in"
"$RATELIMIT" -l --rate 100 --key om --redis "$oom" --on-redis-error local <"$WORK/oom.in" \
  >"$WORK/oom.out" 2>"$WORK/oom.err" &
pipe=$!
sleep 3
redis_cli oom config set maxmemory 0 >/dev/null
status=0
wait $pipe || status=$?
[ "$status" -eq 0 ] || fail "the pipe on a server out of memory exited $status: $(cat "$WORK/oom.err")"
cmp "$WORK/oom.in" "$WORK/oom.out" || fail "the pipe on a server out of memory: output differs"
[ "$(wc -l <"$WORK/oom.err")" -eq 2 ] &&
  grep -qx "ratelimit: Redis at $oom: OOM .*; using this host's bucket 'om' (--on-redis-error=local)" \
    "$WORK/oom.err" &&
  grep -qx "ratelimit: Redis at $oom answers again; back on the shared bucket 'om' (--on-redis-error=local)" \
    "$WORK/oom.err" || fail "the pipe on a server out of memory said: $(cat "$WORK/oom.err")"

# 4. local:25%: 4 hosts (their own state directories) on a key of 20 kB/s through a 10 s outage
# deliver at most N x share x rate x (outage + burst) + 3 chunks a host (man page: the 2 booked
# on the key before the outage and the first of its own bucket; 108 ms of the key's rate each).
start_redis fleet
head -c 4000000 /dev/zero >"$WORK/zeros"
pipes=()
for host in 1 2 3 4; do
  RATELIMIT_STATE_DIR=$WORK/host$host "$RATELIMIT" --rate 20k --key fleet \
    --redis "unix://$WORK/fleet/sock" --on-redis-error local:25% <"$WORK/zeros" \
    >"$WORK/fleet.$host" 2>"$WORK/fleet.$host.err" &
  pipes+=($!)
done
sleep 1.5
stop_redis fleet KILL
killed=$(now_ns)
before=$(cat "$WORK"/fleet.[1-4] | wc -c)
sleep 10
after=$(cat "$WORK"/fleet.[1-4] | wc -c)
outage_ms=$(ms_since "$killed")
kill "${pipes[@]}"
wait "${pipes[@]}" 2>/dev/null || true
delivered=$((after - before))
bound=$(awk -v ms="$outage_ms" 'BEGIN { printf "%d", 4 * 0.25 * 20000 * (ms / 1000 + 1) + 4 * 3 * 0.108 * 20000 }')
# Without the share the hosts would deliver 4 x 20 kB/s: 800 kB in 10 s.
[ "$delivered" -le "$bound" ] || fail "4 hosts at local:25% delivered $delivered B in ${outage_ms} ms, bound $bound"
# The first 5 s are the restart budget (nothing more is booked); at least 3 s of the 5 after it at
# the share.
[ "$delivered" -ge $((4 * 5000 * 3)) ] || fail "4 hosts at local:25% delivered only $delivered B in ${outage_ms} ms"
for host in 1 2 3 4; do
  grep -q "using this host's bucket 'fleet' at 25% of the rate (--on-redis-error=local:25%)" \
    "$WORK/fleet.$host.err" || fail "host $host said: $(cat "$WORK/fleet.$host.err")"
done
