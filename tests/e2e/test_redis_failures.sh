#!/usr/bin/env bash
# Redis gone, paused or dropping connections, under each --on-redis-error policy: gone is waited
# for as a restart for 5 s, then the policy applies.
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
export RATELIMIT_STATE_DIR=$WORK/state
start_redis main
export RATELIMIT_REDIS=unix://$WORK/main/sock

expect_status 0 "$RATELIMIT" exec --rate 10/s --key k -- true
stop_redis main KILL

# fail (the default): 69 once the restart budget (5 s) has passed, one line naming the URL, the
# cause and how long it lasted, the command not run.
start=$(now_ns)
expect_status 69 "$RATELIMIT" exec --rate 10/s --key k -- touch "$WORK/ran"
ms=$(ms_since "$start")
expect_stderr "ratelimit: Redis at unix://$WORK/main/sock: Connection refused for 5s"
[ ! -e "$WORK/ran" ] || fail "the command ran with --on-redis-error=fail"
[ "$ms" -ge 4900 ] && [ "$ms" -lt 8000 ] || fail "fail applied after ${ms} ms"

# allow: runs unthrottled after one warning, once the budget has passed.
start=$(now_ns)
expect_status 0 "$RATELIMIT" exec --on-redis-error=allow --rate 1/s --key k -- true
ms=$(ms_since "$start")
[ "$ms" -ge 4900 ] && [ "$ms" -lt 8000 ] || fail "allow applied after ${ms} ms"
expect_stderr "ratelimit: Redis at unix://$WORK/main/sock: Connection refused for 5s; running unthrottled (--on-redis-error=allow)"

# local: this host's state-file bucket of the same key paces instead, once the budget has passed.
start=$(now_ns)
seq 6 | "$RATELIMIT" -l --burst 0 --on-redis-error=local --rate 10 --key k >/dev/null 2>"$WORK/stderr"
ms=$(ms_since "$start")
[ "$ms" -ge 5300 ] && [ "$ms" -lt 8500 ] || fail "6 lines on the local bucket at 10/s took ${ms} ms"
expect_stderr "ratelimit: Redis at unix://$WORK/main/sock: Connection refused for 5s; using this host's bucket 'k' (--on-redis-error=local)"
[ -e "$WORK/state/k.bucket" ] || ls "$WORK/state" | grep -q '^k' || fail "no local bucket file"

# A server paused past --redis-timeout: 69 after about the timeout, not a hang.
start_redis paused
export RATELIMIT_REDIS=unix://$WORK/paused/sock
expect_status 0 "$RATELIMIT" acquire --rate 10/s --key p
redis_cli paused client pause 5000 all >/dev/null
start=$(now_ns)
expect_status 69 "$RATELIMIT" acquire --redis-timeout 300ms --rate 10/s --key p
ms=$(ms_since "$start")
expect_stderr "ratelimit: Redis at unix://$WORK/paused/sock: no reply within 300ms"
[ "$ms" -ge 250 ] && [ "$ms" -lt 2000 ] || fail "a paused server was given up after ${ms} ms"
start=$(now_ns)
expect_status 0 "$RATELIMIT" exec --redis-timeout 300ms --on-redis-error=allow --rate 10/s --key p -- true
ms=$(ms_since "$start")
[ "$ms" -lt 2000 ] || fail "allow on a paused server took ${ms} ms"

# SIGPIPE reaches the command as ratelimit got it: ignored stays ignored, default stays
# default, and it is never left blocked (bit 13 - 1 of /proc's masks).
start_redis again
export RATELIMIT_REDIS=unix://$WORK/again/sock
sigpipe_of_command() {
  "$RATELIMIT" exec --rate 100/s --key s -- grep -E '^Sig(Ign|Blk)' /proc/self/status |
    while read -r name mask; do printf '%s%d ' "$name" $(((0x$mask >> 12) & 1)); done
}
default=$(sigpipe_of_command)
[ "$default" = "SigBlk:0 SigIgn:0 " ] || fail "default SIGPIPE became '$default'"
ignored=$(trap '' PIPE; sigpipe_of_command)
[ "$ignored" = "SigBlk:0 SigIgn:1 " ] || fail "ignored SIGPIPE became '$ignored'"

# A pipe that loses Redis mid-stream follows the policy and never loses or repeats data.
random_file "$WORK/in" 400000
for policy in fail allow local; do
  start_redis "pipe-$policy"
  export RATELIMIT_REDIS=unix://$WORK/pipe-$policy/sock
  status=0
  "$RATELIMIT" --key "pipe-$policy" --rate 200k --on-redis-error=$policy <"$WORK/in" \
    >"$WORK/out.$policy" 2>"$WORK/err.$policy" &
  pipe=$!
  sleep 0.7
  stop_redis "pipe-$policy" KILL
  wait $pipe || status=$?
  size=$(stat -c %s "$WORK/out.$policy")
  case $policy in
    fail)
      [ "$status" -eq 69 ] || fail "pipe with fail exited $status"
      [ "$size" -gt 0 ] && [ "$size" -lt 400000 ] || fail "pipe with fail wrote $size bytes"
      cmp -s -n "$size" "$WORK/in" "$WORK/out.fail" || fail "pipe with fail: output is not a prefix"
      grep -q "^ratelimit: Redis at unix://$WORK/pipe-fail/sock: " "$WORK/err.fail" ||
        fail "pipe with fail said: $(cat "$WORK/err.fail")" ;;
    *)
      [ "$status" -eq 0 ] || fail "pipe with $policy exited $status: $(cat "$WORK/err.$policy")"
      cmp "$WORK/in" "$WORK/out.$policy" || fail "pipe with $policy: output differs"
      [ "$(grep -c "on-redis-error=$policy" "$WORK/err.$policy")" -eq 1 ] ||
        fail "pipe with $policy warned: $(cat "$WORK/err.$policy")" ;;
  esac
done
