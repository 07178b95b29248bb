#!/usr/bin/env bash
# test_backoff_throttle_redis.sh with --no-agent (RATELIMIT_NO_AGENT=1): each process straight to
# Redis. Timing: run alone (RESOURCE_LOCK timing).
export E2E_NO_AGENT=1
exec bash "$(dirname "${BASH_SOURCE[0]}")/test_backoff_throttle_redis.sh"
