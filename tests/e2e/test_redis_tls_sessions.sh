#!/usr/bin/env bash
# rediss:// sessions kept between processes: the first connection keeps its session in the state
# directory (one file per server, name and trust, 0600) and the next one resumes it (-v says so).
# Another name or another CA file is another session; a file kept for another scope, a corrupt,
# expired, foreign or readable one is ignored (a full handshake, never an error), and an unsafe
# state directory keeps none. New files of processes killed before their rename are removed, and
# the host agent keeps the session of its own connection.
source "$E2E_LIB"
# Sessions between processes are what each process connecting itself resumes: without the host
# agent (whose one connection makes one handshake), which the last part turns on.
export E2E_NO_AGENT=1
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
state=$WORK/state
export RATELIMIT_STATE_DIR=$state
start_tls_main
resumed="ratelimit: TLS session resumed with localhost:$port"

# acquire_over_tls [URL [CA_FILE]]: one acquire that never waits, with -v, over URL (default
# $url) trusting CA_FILE (default ca.crt); exit 0 expected.
acquire_over_tls() {
  expect_status 0 "$RATELIMIT" acquire -v --redis "${1:-$url}" --redis-tls-ca "${2:-$tls/ca.crt}" \
    --rate 1e9 --key k
}
expect_resumed() {
  grep -qx "$resumed" "$WORK/stderr" || fail "not resumed: $(cat "$WORK/stderr")"
}
expect_full_handshake() {
  ! grep -q "TLS session resumed" "$WORK/stderr" || fail "resumed: $(cat "$WORK/stderr")"
}
session_files() { find "$state" -name 'tls-session-*' | sort; }

# The first connection makes a full handshake and keeps its session, 0600; the next resumes it.
acquire_over_tls
expect_full_handshake
[ "$(session_files | wc -l)" = 1 ] || fail "sessions kept: $(session_files)"
file=$(session_files)
[ "$(stat -c %a "$file")" = 600 ] || fail "a session file of mode $(stat -c %a "$file")"
head -n 1 "$file" | grep -q '^ratelimit TLS session 1 for ' || fail "the file begins $(head -n 1 "$file")"
acquire_over_tls
expect_resumed
acquire_over_tls
expect_resumed
# Without -v nothing is said.
expect_status 0 "$RATELIMIT" acquire --redis "$url" "${ca[@]}" --rate 1e9 --key k
expect_stderr ""

# The same server by its address: another name, another session.
acquire_over_tls "rediss://127.0.0.1:$port"
expect_full_handshake
acquire_over_tls "rediss://127.0.0.1:$port"
grep -qx "ratelimit: TLS session resumed with 127.0.0.1:$port" "$WORK/stderr" ||
  fail "not resumed by address: $(cat "$WORK/stderr")"
# Another CA file that trusts the server too: another session.
cat "$tls/other-ca.crt" "$tls/ca.crt" >"$WORK/both-cas.crt"
acquire_over_tls "$url" "$WORK/both-cas.crt"
expect_full_handshake
[ "$(session_files | wc -l)" = 3 ] || fail "sessions kept: $(session_files)"

# A session kept for another name or CA, copied to this scope's file: ignored, then replaced.
for other in $(session_files); do
  [ "$other" != "$file" ] || continue
  cp "$other" "$file"
  acquire_over_tls
  expect_full_handshake
  grep -qx "ratelimit: TLS session file '$file' ignored: kept for another server, name or trust" \
    "$WORK/stderr" || fail "a copied session said: $(cat "$WORK/stderr")"
  acquire_over_tls
  expect_resumed
done

# A corrupt file: ignored (a full handshake, exit 0, nothing said without -v), then replaced.
for corrupt in "garbage" "$(head -n 1 "$file")" "$(head -c 300 "$file")"; do
  printf '%s\n' "$corrupt" >"$file"
  expect_status 0 "$RATELIMIT" acquire --redis "$url" "${ca[@]}" --rate 1e9 --key k
  expect_stderr ""
  acquire_over_tls
  expect_resumed
done
printf 'garbage' >"$file"
acquire_over_tls
expect_full_handshake
grep -qx "ratelimit: TLS session file '$file' ignored: not a session of this version of ratelimit" \
  "$WORK/stderr" || fail "a corrupt session said: $(cat "$WORK/stderr")"

# A file others may read (its secret may have leaked), or another user's: ignored, then replaced.
acquire_over_tls
expect_resumed
chmod 644 "$file"
acquire_over_tls
expect_full_handshake
[ "$(stat -c %a "$file")" = 600 ] || fail "the readable session file was not replaced"
if [ "$(id -u)" = 0 ]; then
  chown nobody "$file"
  acquire_over_tls
  expect_full_handshake
  [ "$(stat -c %u "$file")" = 0 ] || fail "another user's session file was not replaced"
else
  skip_part "another user's session file: chown needs root"
fi
acquire_over_tls
expect_resumed

# A session past its lifetime (the server's tls-session-cache-timeout): ignored.
[ "$(redis_cli main config set tls-session-cache-timeout 1)" = OK ] || fail "CONFIG SET failed"
acquire_over_tls
sleep 1.1
acquire_over_tls
expect_full_handshake
grep -qx "ratelimit: TLS session file '$file' ignored: the session has expired" "$WORK/stderr" ||
  fail "an expired session said: $(cat "$WORK/stderr")"
[ "$(redis_cli main config set tls-session-cache-timeout 300)" = OK ] || fail "CONFIG SET failed"

# A state directory that is not safe keeps no session, and is no error for Redis.
chmod 777 "$state"
expect_status 0 "$RATELIMIT" acquire --redis "$url" "${ca[@]}" --rate 1e9 --key k
expect_stderr ""
acquire_over_tls
grep -q "^ratelimit: TLS sessions not kept: state directory '$state' is writable by group or others" \
  "$WORK/stderr" || fail "an unsafe state directory said: $(cat "$WORK/stderr")"
expect_full_handshake
chmod 700 "$state"

# Processes that keep their sessions at the same time: each replaces the file whole (none finds
# it torn, none fails to keep its own), no new file is left behind, and what is left resumes.
acquire_over_tls
loops=()
for loop in 1 2 3 4 5 6; do
  for _ in 1 2 3 4 5; do
    "$RATELIMIT" acquire -v --redis "$url" "${ca[@]}" --rate 1e9 --key k 2>>"$WORK/loops.stderr" ||
      echo "exit $?" >>"$WORK/loops.stderr"
  done &
  loops+=($!)
done
wait "${loops[@]}"
! grep -vx "$resumed" "$WORK/loops.stderr" ||
  fail "concurrent processes said: $(grep -vx "$resumed" "$WORK/loops.stderr" | sort -u)"
[ -z "$(find "$state" -name '*.new')" ] || fail "left behind: $(find "$state" -name '*.new')"
acquire_over_tls
expect_resumed

# A process killed between writing its new file and renaming it left the file behind: the next
# process that reads or keeps a session removes it, unless its writer still runs.
sh -c 'exit 0' &
dead_pid=$!
wait $dead_pid
abandoned=$(basename "$file").$dead_pid-0.new
kept_new=$(basename "$file").$$-0.new
echo torn >"$state/$abandoned"
echo torn >"$state/$kept_new"
echo other >"$state/other.$dead_pid-0.new"
acquire_over_tls
expect_resumed
[ ! -e "$state/$abandoned" ] || fail "a dead process's new file was left behind"
[ -e "$state/$kept_new" ] || fail "a live process's new file was removed"
[ -e "$state/other.$dead_pid-0.new" ] || fail "a new file not of a session was removed"
rm "$state/$kept_new" "$state/other.$dead_pid-0.new"

# A pipe resumes too, and its bytes come out exact.
acquire_over_tls
random_file "$WORK/in" 100000
expect_status 0 "$RATELIMIT" -v --redis "$url" "${ca[@]}" --key pipe --rate 10M <"$WORK/in" \
  >"$WORK/out"
cmp "$WORK/in" "$WORK/out" || fail "the pipe over TLS changed its bytes"
expect_resumed

# The host agent keeps the session of its connection too, in its state directory, for the next
# agent (or a process that connects itself).
agent_state=$WORK/agent-state
(
  unset RATELIMIT_NO_AGENT
  expect_status 0 "$RATELIMIT" acquire --state-dir "$agent_state" --redis "$url" "${ca[@]}" \
    --rate 1e9 --key k
)
wait_for_file "$agent_state/agent.lock"
kill -9 "$(cat "$agent_state/agent.lock")"
[ -n "$(find "$agent_state" -name 'tls-session-*')" ] || fail "the agent kept no TLS session"
end_test
