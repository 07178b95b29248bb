# Pipes with several keys, for test_multikey_pipe.sh (state file) and test_multikey_pipe_redis.sh
# (Redis, through the agent and not): source it after lib.sh, then call each function with the
# store's options.

# Two pipes on their own host keys (15 kB/s each) that share one fleet key (20 kB/s): each host
# key within its rate, the fleet key within its own (90 kB in about 4.5 s), the data byte-exact;
# `status` names the keys of each pipe and which one held it, --stats and -v how long each key
# held it.
expect_pipes_share_a_fleet_key() {
  random_file "$WORK/host_a" 45000
  random_file "$WORK/host_b" 45000
  local start ms ms_a first
  start=$(now_ns)
  "$RATELIMIT" --key host:a --rate 15kB/s --key fleet --rate 20kB/s --stats -v "$@" \
    <"$WORK/host_a" >"$WORK/host_a.out" 2>"$WORK/host_a.err" && touch "$WORK/host_a.done" &
  first=$!
  "$RATELIMIT" --key host:b --rate 15kB/s --key fleet --rate 20kB/s "$@" \
    "$WORK/host_b" -o "$WORK/host_b.out" 2>"$WORK/host_b.err" &
  local second=$!
  sleep 1.5
  # status never goes through the agent: it takes no --no-agent.
  local status_options=() option
  for option in "$@"; do [ "$option" = --no-agent ] || status_options+=("$option"); done
  "$RATELIMIT" status "${status_options[@]}" >"$WORK/pipes.status" 2>&1 ||
    fail "status beside two pipes: $(cat "$WORK/pipes.status")"
  "$RATELIMIT" status --json "${status_options[@]}" >"$WORK/pipes.json" 2>&1 ||
    fail "status --json beside two pipes: $(cat "$WORK/pipes.json")"
  wait "$first" || fail "the pipe on host:a and fleet failed: $(cat "$WORK/host_a.err")"
  ms_a=$(ms_since "$start")
  wait "$second" || fail "the pipe on host:b and fleet failed: $(cat "$WORK/host_b.err")"
  ms=$(ms_since "$start")
  cmp -s "$WORK/host_a" "$WORK/host_a.out" || fail "the pipe on host:a changed its data"
  cmp -s "$WORK/host_b" "$WORK/host_b.out" || fail "the pipe on host:b changed its data"
  # 45 kB at 15 kB/s: 3 s for each host key alone; 90 kB at 20 kB/s: 4.5 s for the fleet key.
  [ "$ms_a" -ge 2700 ] || fail "host:a moved 45 kB in ${ms_a} ms, faster than its 15 kB/s"
  [ "$ms" -ge 4000 ] && [ "$ms" -lt 9000 ] ||
    fail "two pipes of 45 kB sharing a 20 kB/s fleet key took ${ms} ms, expected about 4500"
  grep -Eq "^ratelimit: 45000 bytes in .*; held by key 'fleet' [0-9.]+(ms|s)" "$WORK/host_a.err" ||
    fail "--stats did not say that the fleet key held the pipe: $(cat "$WORK/host_a.err")"
  grep -Eq "^ratelimit: waited [0-9.]+(ms|s) for key 'fleet'$" "$WORK/host_a.err" ||
    fail "-v did not say that the pipe waited for the fleet key: $(cat "$WORK/host_a.err")"
  grep -Eq " host:a,fleet *$" "$WORK/pipes.status" ||
    fail "status did not name both keys of a pipe: $(cat "$WORK/pipes.status")"
  grep -Eq "^pipe [0-9]+: waits for (key 'fleet'|no key); held by key 'host:a' [0-9.]+(ms|s), key 'fleet' [0-9.]+(ms|s)$" "$WORK/pipes.status" ||
    fail "status did not say which key held the pipe: $(cat "$WORK/pipes.status")"
  grep -Eq '"keys":\[\{"key":"host:a","held_seconds":[0-9.]+\},\{"key":"fleet","held_seconds":[0-9.]+\}\],"held_by":("fleet"|null)' "$WORK/pipes.json" ||
    fail "status --json did not give the keys of a pipe: $(cat "$WORK/pipes.json")"
}

# A turn refused (--timeout, --stop-at-quota) takes nothing from any key: the host key is as
# fresh as before, and the line says which key refused it.
expect_pipe_refusal_takes_nothing() {
  expect_status 0 "$RATELIMIT" acquire --key busy --rate 1000/s --permits 5000 "$@"
  head -c 3000 /dev/zero >"$WORK/zeros"
  expect_status 75 "$RATELIMIT" --key host:c --rate 1kB/s --chunk 1000 --key busy --timeout 1s \
    "$@" "$WORK/zeros" -o "$WORK/refused.out"
  [ ! -s "$WORK/refused.out" ] || fail "a refused pipe wrote $(wc -c <"$WORK/refused.out") bytes"
  grep -Eq "^ratelimit: stopped: the next turn of key 'busy' was [45]s away, longer than --timeout 1s; 0 bytes written, the rest left unread$" "$WORK/stderr" ||
    fail "the refusal did not name the key: $(cat "$WORK/stderr")"
  # host:c took nothing: a whole second of it is still free at once (a chunk booked would not be).
  expect_status 0 "$RATELIMIT" acquire --key host:c --rate 1000/s --permits 900 --try "$@"

  # A quota spent on the fleet key ends the pipe (--stop-at-quota) without taking from host:d.
  expect_status 0 "$RATELIMIT" acquire --key spent --rate 1000/s --quota 1000/1h --permits 1000 "$@"
  expect_status 75 "$RATELIMIT" --key host:d --rate 1kB/s --chunk 1000 --key spent --stop-at-quota \
    "$@" "$WORK/zeros" -o "$WORK/spent.out"
  [ ! -s "$WORK/spent.out" ] || fail "a pipe held by a spent quota wrote"
  grep -Eq "^ratelimit: stopped: a quota of key 'spent' is spent for " "$WORK/stderr" ||
    fail "the spent quota did not name the key: $(cat "$WORK/stderr")"
  expect_status 0 "$RATELIMIT" acquire --key host:d --rate 1000/s --permits 900 --try "$@"
}

# The usage rules of several keys hold for a pipe as for exec and acquire.
expect_pipe_key_rules() {
  expect_error "ratelimit: --key 'twice' is given twice: name each key once" \
    "$RATELIMIT" --key twice --rate 1k --key twice --rate 2k "$@" /dev/null
  expect_error "ratelimit: with several --key, give each key's --rate, --burst, --quota... after its --key, not before the first" \
    "$RATELIMIT" --rate 1k --key first --key second "$@" /dev/null
}

# A later key's timetable is followed: tt:b at 1 line/s until the boundary 3 s away, then
# 100000/s, under tt:a's 1000/s: 300 lines take about 3 s (a few before the boundary, the rest
# at tt:a's rate), not the 300 s of tt:b's first entry, and arrive whole.
expect_pipe_follows_each_keys_timetable() {
  local TZ before at boundary start ms
  boundary_in 3
  seq 300 >"$WORK/tt.in"
  start=$(now_ns)
  timeout 30 "$RATELIMIT" -l --key tt:a --rate 1000/s --key tt:b --rate "$before,1/s $at,100000/s" \
    "$@" "$WORK/tt.in" -o "$WORK/tt.out" 2>"$WORK/tt.err" ||
    fail "the pipe on tt:a and tt:b's timetable failed: $(cat "$WORK/tt.err")"
  ms=$(ms_since "$start")
  cmp -s "$WORK/tt.in" "$WORK/tt.out" || fail "the pipe on tt:a and tt:b changed its data"
  [ "$ms" -ge 1500 ] && [ "$ms" -lt 9000 ] ||
    fail "300 lines under tt:b's timetable took ${ms} ms, expected about 3000"
}

# The chunks are sized by the slowest key: under a fast first key (1 MB/s) and a slow second one
# (10 kB/s), 30 kB go in chunks of 1080 bytes over about 3 s, not in one chunk whose turn is free
# (Guava's first) at once.
expect_pipe_chunks_follow_the_slowest_key() {
  random_file "$WORK/slow.in" 30000
  local start ms
  start=$(now_ns)
  expect_status 0 "$RATELIMIT" --key ck:fast --rate 1MB/s --key ck:slow --rate 10kB/s "$@" \
    "$WORK/slow.in" -o "$WORK/slow.out"
  ms=$(ms_since "$start")
  cmp -s "$WORK/slow.in" "$WORK/slow.out" || fail "the pipe under a slow second key changed its data"
  [ "$ms" -ge 2400 ] && [ "$ms" -lt 9000 ] ||
    fail "30 kB under a 10 kB/s second key took ${ms} ms, expected about 2900"
}

# --stats names every key's quotas, in text and in JSON.
expect_pipe_stats_name_each_keys_quotas() {
  head -c 1000 /dev/zero >"$WORK/q.in"
  expect_status 0 "$RATELIMIT" --key q:a --rate 1MB/s --quota 1MB/h --key q:b --rate 1MB/s \
    --quota 2MB/d --stats "$@" "$WORK/q.in" -o /dev/null
  [ "$(grep '^ratelimit: quota' "$WORK/stderr")" = "ratelimit: quota 1MB/h of key 'q:a': 1000 used in the window
ratelimit: quota 2MB/d of key 'q:b': 1000 used in the window" ] ||
    fail "--stats did not name each key's quota: $(cat "$WORK/stderr")"
  expect_status 0 "$RATELIMIT" --key q:c --rate 1MB/s --key q:d --rate 1MB/s --quota 2MB/d \
    --stats=json "$@" "$WORK/q.in" -o /dev/null
  grep -Fq '"quotas":[{"quota":"2MB/d","limit":2000000,"period_seconds":86400,"used":1000,"key":"q:d"}]' \
    "$WORK/stderr" || fail "--stats=json did not name the key of the quota: $(cat "$WORK/stderr")"
}
