#!/usr/bin/env bash
# Several keys in one call in Redis, through the host agent, as on the state file
# (test_multikey.sh): one script call over all the keys; in a Cluster, keys whose names share a
# {tag} go in one call, and keys on different slots are refused (64) naming them.
# Timing: grants measured as they come (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
source "$(dirname "${BASH_SOURCE[0]}")/multikey_shared.sh"
start_redis main
store=(--redis "unix://$WORK/main/sock" --redis-timeout 5s)

expect_multikey_rules "${store[@]}"
expect_multikey_loops "${store[@]}"

# A Cluster: one slot per call.
start_cluster c1 c2 c3
cluster=(--redis "redis://127.0.0.1:$(cat "$WORK/c1/port")" --redis-timeout 5s)
for _ in 1 2 3; do
  expect_status 0 "$RATELIMIT" acquire --key '{crawl}site:a' --rate 1/s --key '{crawl}all' --rate 10/s "${cluster[@]}"
done
expect_status 75 "$RATELIMIT" acquire --key '{crawl}site:a' --rate 1/s --key '{crawl}all' --rate 10/s --try "${cluster[@]}"
expect_status 0 "$RATELIMIT" acquire --key '{crawl}site:b' --rate 1/s --key '{crawl}all' --rate 10/s --timeout 1s "${cluster[@]}"
expect_status 64 "$RATELIMIT" acquire --key site:a --rate 1/s --key all --rate 10/s "${cluster[@]}"
grep -q "^ratelimit: Redis at .*: keys 'site:a', 'all' are on different Cluster slots, and one call decides keys of one slot only: start their names with the same {tag} (e.g. {crawl}site:a and {crawl}all)$" "$WORK/stderr" ||
  fail "keys of two slots: $(cat "$WORK/stderr")"

# Redis away: --on-redis-error=local takes from this host's buckets of every key, all or nothing
# (a refusal by one takes nothing from the other); allow grants.
away=(--redis "unix://$WORK/away.sock" --redis-timeout 200ms --no-agent)
expect_status 0 "$RATELIMIT" acquire --key away:user --rate 1/s --key away:all --rate 2/s --try --on-redis-error=local "${away[@]}"
grep -q "; using this host's buckets 'away:user', 'away:all' (--on-redis-error=local)$" "$WORK/stderr" ||
  fail "the outage did not name the keys: $(cat "$WORK/stderr")"
expect_status 75 "$RATELIMIT" acquire --key away:user --rate 1/s --key away:all --rate 2/s --try --on-redis-error=local "${away[@]}"
sleep 0.6
expect_status 0 "$RATELIMIT" acquire --key away:other --rate 1/s --key away:all --rate 2/s --try --on-redis-error=local "${away[@]}"
expect_status 0 "$RATELIMIT" acquire --key away:user --rate 1/s --key away:all --rate 2/s --try --on-redis-error=allow "${away[@]}"
expect_status 69 "$RATELIMIT" acquire --key away:user --rate 1/s --key away:all --rate 2/s "${away[@]}"
