#!/usr/bin/env bash
# The README's first recipe: an API of 10 calls a second, called by loops sharing
# `--rate 9/s --burst 0`, never gets 11 calls in one second; the grants are spaced evenly, so the
# busiest second holds 9 or 10 of them however many loops share the key.
# Timing: grant moments from the store (acquire -vv), run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/quota_shared.sh"
export RATELIMIT_STATE_DIR=$WORK/state

acquire_in_parallel api 3 8 --rate 9/s --burst 0 --key api
read -r certain possible width < <(python3 "$(dirname "${BASH_SOURCE[0]}")/quota_windows.py" \
  within 1 "$WORK"/api.grants.*)
echo "busiest second: $certain grants certainly, $possible possibly (moments within $width ms)"
[ "$(cat "$WORK"/api.grants.* | wc -l)" -eq 24 ] || fail "$(cat "$WORK"/api.grants.* | wc -l) grants of 24"
[ "$certain" -le 10 ] || fail "$certain calls in one second at --rate 9/s --burst 0"
[ "$certain" -ge 8 ] || fail "only $certain calls in the busiest second at 9/s: the loops idle"
