# Sourced by the tests of several keys in one call, after lib.sh: the rules every store keeps, and
# loops of acquire over several keys whose grants are checked against each key's bound, each grant
# known to lie between its request's sending and its answer's arrival plus the store's wait
# (acquire -vv).

# expect_multikey_rules STORE_OPTIONS...: a second --key starts a group of its own options; a
# refusal by one key (--try) takes nothing from the others; -v names the key that held the call.
expect_multikey_rules() {
  expect_error "ratelimit: --key 'a' is given twice: name each key once" \
    "$RATELIMIT" acquire --key a --rate 1/s --key a --rate 2/s "$@"
  expect_error "ratelimit: with several --key, give each key's --rate, --burst, --quota... after its --key, not before the first" \
    "$RATELIMIT" acquire --rate 1/s --key a --key b --rate 2/s "$@"
  # A bucket option twice for one key is refused as for one key alone.
  expect_error "ratelimit: --rate given twice ('1/s', then '2/s'): give it once" \
    "$RATELIMIT" acquire --key a --rate 1/s --key b --rate 1/s --rate 2/s "$@"
  expect_error "ratelimit: --rate given twice ('1/s', then '2/s'): give it once" \
    "$RATELIMIT" acquire --rate 1/s --key a --rate 2/s "$@"
  local many=() key
  for key in $(seq 17); do many+=(--key "k$key" --rate 1/s); done
  expect_error "ratelimit: too many --key: 17 given, at most 16" "$RATELIMIT" acquire "${many[@]}" "$@"
  # Calls that must be granted now say --timeout 1s, not --try: on a loaded machine a Redis round
  # trip (through the agent, the script loaded on a fresh server) may outlast --try's 50 ms.
  expect_status 0 "$RATELIMIT" acquire "${many[@]:0:32}" --timeout 1s "$@"

  # User 1 at 1/s and users at 2/s: user 1's second call (--timeout 100ms: a --try with room for
  # the round trip) is refused by its own key, and takes nothing from users, whose next turn
  # (500 ms after the first) is then free to user 2 at once (within 100 ms; 350 ms had user 1
  # taken it).
  expect_status 0 "$RATELIMIT" acquire --key user:1 --rate 1/s --key users --rate 2/s --timeout 1s "$@"
  sleep 0.6
  expect_status 75 "$RATELIMIT" acquire -v --key user:1 --rate 1/s --key users --rate 2/s --timeout 100ms "$@"
  grep -q "^ratelimit: key 'user:1' refused the call: its permits were .* away$" "$WORK/stderr" ||
    fail "-v did not name the key that refused: $(cat "$WORK/stderr")"
  expect_status 0 "$RATELIMIT" acquire --key user:2 --rate 1/s --key users --rate 2/s --timeout 100ms "$@"
  # users' turn went to user 2: the next call of a new user waits for users, and says so.
  expect_status 0 "$RATELIMIT" acquire -v --key user:3 --rate 1/s --key users --rate 2/s "$@"
  grep -q "^ratelimit: waited .* for key 'users'$" "$WORK/stderr" ||
    fail "-v did not name the key waited for: $(cat "$WORK/stderr")"
  # Each key's own settings are told as for one key: users keeps its 2/s.
  expect_status 0 "$RATELIMIT" acquire --key user:4 --rate 1/s --key users --rate 3/s "$@"
  grep -q "^ratelimit: key 'users' has rate 2/s, burst 1s: this call follows it, not its own rate 3/s, burst 1s (to make them the key's: ratelimit set --key users --rate 3/s)$" "$WORK/stderr" ||
    fail "the key followed was not told: $(cat "$WORK/stderr")"
  # exec runs its command once every key grants.
  [ "$("$RATELIMIT" exec --key user:5 --rate 1/s --key users --rate 2/s "$@" -- echo crawled)" = crawled ] ||
    fail "exec over several keys did not run its command"
  # A key without its own options follows what the key owns.
  expect_status 75 "$RATELIMIT" acquire --key user:3 --key users --try "$@"
  expect_status 64 "$RATELIMIT" acquire --key users --key nobody "$@"
  grep -q "^ratelimit: no --rate, and key 'nobody' has no bucket in .* to follow" "$WORK/stderr" ||
    fail "a key without options or bucket: $(cat "$WORK/stderr")"
  # --max-inflight counts the commands of the first key: a second call whose first key is
  # running its one command is refused, whatever its other keys.
  # shellcheck disable=SC2016 # $1 is sh's
  "$RATELIMIT" exec --max-inflight 1 --key slot:a --rate 100/s --key slot:b --rate 100/s "$@" -- \
    sh -c 'touch "$1"; sleep 2' sh "$WORK/slot-a.running" &
  local running=$!
  wait_for_file "$WORK/slot-a.running"
  expect_status 75 "$RATELIMIT" exec --max-inflight 1 --key slot:a --rate 100/s --key slot:c --rate 100/s --try "$@" -- true
  expect_status 0 "$RATELIMIT" exec --max-inflight 1 --key slot:c --rate 100/s --key slot:a --rate 100/s --timeout 1s "$@" -- true
  wait "$running"
  # A pause reported on one key holds the whole call, and -v names that key.
  expect_status 0 "$RATELIMIT" acquire --key quiet --rate 10/s --key paused --rate 10/s "$@"
  expect_status 0 "$RATELIMIT" throttle --key paused --retry-after 1 "$@"
  local start
  start=$(now_ns)
  expect_status 0 "$RATELIMIT" acquire -v --key quiet --rate 10/s --key paused --rate 10/s "$@"
  [ "$(ms_since "$start")" -ge 700 ] || fail "a call with a paused key went after $(ms_since "$start") ms"
  grep -q "^ratelimit: key 'paused' is backing off: waited 0.[0-9]*s for its pause$" "$WORK/stderr" ||
    fail "-v on a call held by a paused key: $(cat "$WORK/stderr")"
}

# multikey_loop NAME SECONDS KEY_OPTIONS...: acquire -vv KEY_OPTIONS... in turn until SECONDS
# have passed; each grant as "<from_ns> <to_ns>" in $WORK/NAME.grants (appended).
multikey_loop() {
  local name=$1 end=$(($(now_ns) + $2 * 1000000000))
  shift 2
  while [ "$(now_ns)" -lt "$end" ]; do
    "$RATELIMIT" acquire -vv "$@" 2>&1 >/dev/null | grant_moments >>"$WORK/$name.grants"
  done
}

# The grants that `acquire -vv` said on its standard input, as "<from_ns> <to_ns>" lines.
grant_moments() {
  local moment='\([0-9]*\)\.\([0-9]\{9\}\)'
  sed -n "s/.* granted between $moment and $moment s on the monotonic clock\$/\1\2 \3\4/p"
}

# hammer_loop NAME SECONDS ARGS...: `acquire -vv ARGS --try` every 100 ms for SECONDS, each exit
# status added to $WORK/NAME.status and each grant to $WORK/NAME.grants.
hammer_loop() {
  local name=$1 end=$(($(now_ns) + $2 * 1000000000)) status
  shift 2
  while [ "$(now_ns)" -lt "$end" ]; do
    status=0
    "$RATELIMIT" acquire -vv "$@" --try 2>>"$WORK/$name.err" >/dev/null || status=$?
    echo "$status" >>"$WORK/$name.status"
    sleep 0.1
  done
  grant_moments <"$WORK/$name.err" >"$WORK/$name.grants"
}

# expect_within_bound NAME RATE BURST FILES...: the grants in FILES ("<from_ns> <to_ns>" lines)
# hold in every window, from one grant to a later one, at most RATE x its length + BURST + 1 (the
# first permit is free) + 1 (a wake-up late), the window taken as long as it can be (the later
# grant's latest moment minus the earlier one's earliest). Sets $grants to their count and
# $grant_rate to the grants per second from the first to the last (their earliest moments).
expect_within_bound() {
  local name=$1 result
  shift
  result=$(python3 - "$@" <<'PY'
import sys
rate, burst = float(sys.argv[1]), float(sys.argv[2])
grants = sorted(tuple(int(x) / 1e9 for x in line.split())
                for path in sys.argv[3:] for line in open(path) if line.strip())
for i in range(len(grants)):
    for j in range(i + 1, len(grants)):
        if j - i + 1 > rate * (grants[j][1] - grants[i][0]) + burst + 2:
            print(f"{j - i + 1} grants in {grants[j][1] - grants[i][0]:.3f} s")
            sys.exit(1)
span = grants[-1][0] - grants[0][0] if len(grants) > 1 else 0
print(f"{len(grants)} {(len(grants) - 1) / span if span else 0:.3f}")
PY
  ) || fail "$name: grants beyond the bound of rate $1/s, burst $2: $result"
  read -r grants grant_rate <<<"$result"
  echo "$name: $grants grants, $grant_rate/s, within rate $1/s + burst $2 in every window"
}

# expect_multikey_loops STORE_OPTIONS...: the loops, shortened for CI (scripts/bench_multikey.sh
# runs them longer and checks closer), with bounds that hold on a loaded machine.
expect_multikey_loops() {
  local loop pids=() site
  # 8 loops over keys a (20/s) and b (10/s), four naming them in each order, and 2 loops on a
  # alone: no deadlock (each loop ends), neither key beyond its bound.
  for loop in 1 2 3 4; do
    multikey_loop "pair.$loop" 4 --key pair:a --rate 20/s --key pair:b --rate 10/s "$@" &
    pids+=($!)
    multikey_loop "pair_reversed.$loop" 4 --key pair:b --rate 10/s --key pair:a --rate 20/s "$@" &
    pids+=($!)
  done
  for loop in 1 2; do
    multikey_loop "pair_a_alone.$loop" 4 --key pair:a --rate 20/s "$@" &
    pids+=($!)
  done
  timeout_wait 60 "${pids[@]}"
  expect_within_bound "key pair:b" 10 10 "$WORK"/pair.*.grants "$WORK"/pair_reversed.*.grants
  [ "$grants" -ge 30 ] || fail "key pair:b granted only $grants in 4 s at 10/s"
  expect_within_bound "key pair:a" 20 20 "$WORK"/pair*.grants

  # The crawler: 8 loops over 5 sites, 2/s per site and 5/s in all, 6 s.
  pids=()
  for loop in 1 2 3 4 5 6 7 8; do
    site=$((loop % 5))
    multikey_loop "crawl.$site.$loop" 6 --key "site:$site" --rate 2/s --key all --rate 5/s "$@" &
    pids+=($!)
  done
  timeout_wait 60 "${pids[@]}"
  for site in 0 1 2 3 4; do
    expect_within_bound "site:$site" 2 2 "$WORK"/crawl."$site".*.grants
  done
  expect_within_bound "all sites" 5 5 "$WORK"/crawl.*.grants
  python3 -c "import sys; sys.exit(not 4.5 <= $grant_rate <= 5.5)" ||
    fail "the crawl went at $grant_rate/s in all, not within 10% of 5/s"

  # Users hammering their own 1/s key with --try every 100 ms, and 12 other users (1/s each, who
  # wait) under a global 10/s, 5 s: the hammers are refused, and their refusals take nothing from
  # the global key, which grants its 10/s to the others and them.
  pids=()
  for loop in 1 2 3 4; do
    hammer_loop "hammer.$loop" 5 --key "hammer:$loop" --rate 1/s --key global --rate 10/s "$@" &
    pids+=($!)
  done
  for loop in $(seq 12); do
    multikey_loop "user.$loop" 5 --key "user:$loop" --rate 1/s --key global --rate 10/s "$@" &
    pids+=($!)
  done
  timeout_wait 60 "${pids[@]}"
  local refused
  refused=$(cat "$WORK"/hammer.*.status | grep -c '^75$' || true)
  [ "$refused" -gt 20 ] || fail "the hammering users were refused only $refused times"
  ! grep -v '^\(0\|75\)$' "$WORK"/hammer.*.status >/dev/null || fail "a --try exited other than 0 or 75"
  for loop in 1 2 3 4; do
    expect_within_bound "hammer:$loop" 1 1 "$WORK/hammer.$loop.grants"
  done
  expect_within_bound "global" 10 10 "$WORK"/hammer.*.grants "$WORK"/user.*.grants
  python3 -c "import sys; sys.exit(not 9.0 <= $grant_rate <= 11.0)" ||
    fail "the global key granted $grant_rate/s with refused users about, not within 10% of 10/s"
}

# timeout_wait SECONDS PIDS...: waits for the background jobs PIDS, failing if they outlive SECONDS
# (a deadlock).
timeout_wait() {
  local end=$(($(now_ns) + $1 * 1000000000)) pid
  shift
  for pid in "$@"; do
    while kill -0 "$pid" 2>/dev/null; do
      [ "$(now_ns)" -lt "$end" ] || { kill "$@" 2>/dev/null; fail "loops still running after the timeout: a deadlock?"; }
      sleep 0.05
    done
    wait "$pid" || fail "a loop failed"
  done
}
