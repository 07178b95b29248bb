#!/usr/bin/env bash
# Several keys in one call on the state file: each --key with its own options, all or nothing (a
# refusal takes nothing from any key), -v names the key that held the call; 8 loops over 2 keys
# named in differing orders never deadlock nor exceed either key's bound; the crawler (8 loops over
# 5 sites, 2/s per site and 5/s in all) and users hammering with --try while others still get the
# global rate. test_multikey_redis.sh: the same in Redis through the agent.
# Timing: grants measured as they come (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/multikey_shared.sh"
store=(--state-dir "$WORK/state")

expect_multikey_rules "${store[@]}"
expect_multikey_loops "${store[@]}"
