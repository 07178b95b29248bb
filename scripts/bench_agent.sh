#!/usr/bin/env bash
# The host agent against direct connections, on a redis-server of its own (loopback TCP and TLS),
# in about two minutes: loops of `ratelimit acquire` on one key at a rate that never waits, with
# 1, 8 and 64 loops at once; for each, the server's CPU per decision (INFO's used_cpu_sys +
# used_cpu_user before and after, less what an idle control server used meanwhile) and the wall time
# per call of one loop; the same loops on the state file for the wall time to compare with. The
# agent's own CPU per decision too (/proc/PID/schedstat), and the floor: the same script calls
# from redis-benchmark on kept connections. Writes bench/results/agent.md.
# Then the fleet (a few minutes more): 1 and 4 agents (one state directory each, as hosts) with 1
# and 16 clients each sending back to back (bench/agent_load), TCP and TLS, on 1 and 16 keys:
# decisions/s, the server's and the agents' CPU per decision, the script calls per decision and per
# server read; the same load with --no-agent and from redis-benchmark on as many kept connections.
# Environment: RATELIMIT (a Release binary; default: the bench tree's), AGENT_LOAD (default: the
# agent_load of RATELIMIT's tree), BENCH_CALLS (calls of a single loop, default 400; 8 loops make
# an eighth each, 64 loops a 64th, at least 10), BENCH_FLEET_SECONDS (each fleet row, default 3),
# BENCH_FLEET_ONLY=1 (the fleet's rows alone, printed and not written: to compare two binaries).
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
source "$(dirname "${BASH_SOURCE[0]}")/redis_bench.sh"
ensure_packages redis-server redis-tools openssl
use_bench_binary
AGENT_LOAD=${AGENT_LOAD:-$(dirname "$RATELIMIT")/../bench/agent_load}

TMP=$(mktemp -d)
start_bench_server
# A second server, idle, under the same load: what the measured one spends without requests in
# the same time (its cron, made dearer by the load) is what the control spends.
mkdir -p "$TMP/control"
redis-server --port 0 --unixsocket "$TMP/control/sock" --save '' --appendonly no \
  --dir "$TMP/control" --logfile "$TMP/control/log" >/dev/null 2>&1 &
control=$!
# The agents end with the benchmark: killed by the pids in their lock files.
cleanup() {
  local lock
  for lock in "$TMP"/*/agent.lock; do [ -s "$lock" ] && kill "$(cat "$lock")" 2>/dev/null || true; done
  kill "$server" "$control" 2>/dev/null || true
  wait "$server" "$control" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
until redis-cli -s "$TMP/redis/sock" ping >/dev/null 2>&1; do sleep 0.01; done
until redis-cli -s "$TMP/control/sock" ping >/dev/null 2>&1; do sleep 0.01; done
TCP_URL=redis://127.0.0.1:$port
TLS_URL=rediss://localhost:$tls_port
CALLS=${BENCH_CALLS:-400}
unset RATELIMIT_REDIS RATELIMIT_NO_AGENT
# The agents live through the run (the fleet's rows come back to an agent minutes later); the
# cleanup ends them.
export RATELIMIT_AGENT_IDLE=15m

# The CPU so far of the server (or of the control: server_cpu control), in microseconds.
server_cpu() {
  redis-cli -s "$TMP/${1:-redis}/sock" info cpu |
    awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%.0f", s * 1e6 }'
}
# A process's CPU so far, all its threads (the agent answers on one thread per deployment), in
# microseconds (/proc/PID/task/*/schedstat: nanoseconds on a CPU).
process_cpu() {
  cat /proc/"$1"/task/*/schedstat | awk '{ s += $1 } END { printf "%.0f", s / 1000 }'
}

# The server's own time per FCALL since the last reset (INFO commandstats), in microseconds.
script_time() {
  redis-cli -s "$TMP/redis/sock" info commandstats |
    sed -n 's/^cmdstat_fcall:.*usec_per_call=\([0-9.]*\).*/\1/p' | grep . || echo -
}

# measure LOOPS STATE_DIR [acquire options...]: LOOPS loops at once of CALLS/LOOPS acquires (at
# least 10) each. Prints "wall_us_per_call server_cpu_us_per_decision agent_cpu_us_per_decision
# script_us".
measure() {
  local loops=$1 state=$2 calls pids=() start elapsed_us cpu_before cpu_after agent="" agent_before=0
  shift 2
  calls=$((CALLS / loops))
  [ "$calls" -ge 10 ] || calls=10
  [ -s "$state/agent.lock" ] && agent=$(cat "$state/agent.lock") && agent_before=$(process_cpu "$agent")
  redis-cli -s "$TMP/redis/sock" config resetstat >/dev/null
  : >"$TMP/failed"
  cpu_before=$(server_cpu)
  control_before=$(server_cpu control)
  start=$(date +%s%N)
  for _ in $(seq "$loops"); do
    (for _ in $(seq "$calls"); do
      RATELIMIT_STATE_DIR=$state "$RATELIMIT" acquire --rate 1G/s --key bench "$@" 2>/dev/null ||
        echo >>"$TMP/failed"
    done) &
    pids+=($!)
  done
  wait "${pids[@]}"
  elapsed_us=$((($(date +%s%N) - start) / 1000))
  cpu_after=$(server_cpu)
  idle=$(($(server_cpu control) - control_before))
  awk -v wall="$elapsed_us" -v calls="$calls" -v loops="$loops" -v cpu=$((cpu_after - cpu_before)) \
    -v idle="$idle" -v agent_cpu=$([ -n "$agent" ] && echo $(($(process_cpu "$agent") - agent_before)) || echo -1) \
    'BEGIN { n = calls * loops; server = (cpu - idle) / n; if (server < 0) server = 0
      printf "%.0f %.1f %s ", wall / calls, server, agent_cpu < 0 ? "-" : sprintf("%.1f", agent_cpu / n) }'
  echo "$(script_time) $(wc -l <"$TMP/failed")"
}

# warm_agent STATE_DIR URL [options]: starts the agent of STATE_DIR and connects it to URL.
warm_agent() {
  local state=$1
  shift
  RATELIMIT_STATE_DIR=$state "$RATELIMIT" acquire --rate 1G/s --key bench --redis "$@"
  until [ -S "$state/agent.sock" ]; do sleep 0.01; done
  RATELIMIT_STATE_DIR=$state "$RATELIMIT" acquire --rate 1G/s --key bench --redis "$@"
}

# floor LOOPS: the same decisions made by redis-benchmark on LOOPS kept connections (TCP), as a
# pipe or an agent makes them, measured the same way: what a decision costs the server at best
# under this run's load. Prints as measure() does.
read -ra bucket <<<"$(bucket_call "$TMP/redis/sock" "$RATELIMIT_ROOT/src/stores/redis/redis_bucket.lua")"
floor() {
  local cpu_before control_before idle n=$((CALLS * 10))
  redis-cli -s "$TMP/redis/sock" config resetstat >/dev/null
  cpu_before=$(server_cpu)
  control_before=$(server_cpu control)
  redis-benchmark -h 127.0.0.1 -p "$port" -c "$1" -n "$n" -q "${bucket[@]}" 1 'ratelimit:{floor}' \
    reserve "" 1 9223372036854775807 "1,bursty,1e9,1,0,3,0,0,0," bursty 0 1e9 1 >/dev/null
  idle=$(($(server_cpu control) - control_before))
  awk -v cpu=$(($(server_cpu) - cpu_before)) -v idle="$idle" -v n="$n" \
    'BEGIN { printf "- %.1f - ", (cpu - idle) / n }'
  echo "$(script_time) 0"
}

# paced_floor US: the same decisions on one kept connection (redis-cli -r -i), one every US
# microseconds, the pace at which the agent's row sent them: a server that gets a call every few
# milliseconds runs it from cold caches, at several times its cost in a busy stream (the floor
# above), and this is that cost without any connection made. Prints as measure() does.
paced_floor() {
  local cpu_before control_before idle
  redis-cli -s "$TMP/redis/sock" config resetstat >/dev/null
  cpu_before=$(server_cpu)
  control_before=$(server_cpu control)
  redis-cli -h 127.0.0.1 -p "$port" -r "$CALLS" -i "$(awk -v us="$1" 'BEGIN { printf "%.6f", us / 1e6 }')" \
    "${bucket[@]}" 1 'ratelimit:{floor}' reserve "" 1 9223372036854775807 "1,bursty,1e9,1,0,3,0,0,0," \
    bursty 0 1e9 1 >/dev/null
  idle=$(($(server_cpu control) - control_before))
  awk -v cpu=$(($(server_cpu) - cpu_before)) -v idle="$idle" -v n="$CALLS" \
    'BEGIN { printf "- %.1f - ", (cpu - idle) / n }'
  echo "$(script_time) 0"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
rows=()
loop_counts=(1 8 64)
[ -n "${BENCH_FLEET_ONLY:-}" ] && loop_counts=()
for loops in "${loop_counts[@]}"; do
  echo "== $loops loop(s)" >&2
  file=$(measure "$loops" "$TMP/file")
  tcp_direct=$(measure "$loops" "$TMP/direct" --redis "$TCP_URL" --no-agent)
  warm_agent "$TMP/agent-tcp" "$TCP_URL"
  tcp_agent=$(measure "$loops" "$TMP/agent-tcp" --redis "$TCP_URL")
  tls_direct=$(measure "$loops" "$TMP/direct" --redis "$TLS_URL" --redis-tls-ca "$tls/ca.crt" --no-agent)
  warm_agent "$TMP/agent-tls" "$TLS_URL" --redis-tls-ca "$tls/ca.crt"
  tls_agent=$(measure "$loops" "$TMP/agent-tls" --redis "$TLS_URL" --redis-tls-ca "$tls/ca.crt")
  kept=$(floor "$loops")
  # The agent row's pace: its wall per call over the loops.
  paced=$(paced_floor "$(awk -v wall="${tcp_agent%% *}" -v loops="$loops" 'BEGIN { printf "%.0f", wall / loops }')")
  for row in "state file|$file" "TCP kept (redis-benchmark)|$kept" "TCP kept, agent's pace|$paced" \
    "TCP direct|$tcp_direct" "TCP agent|$tcp_agent" \
    "TLS direct|$tls_direct" "TLS agent|$tls_agent"; do
    read -r wall server agent_cpu script failed <<<"${row#*|}"
    [ "${row%%|*}" = "state file" ] && server=-
    rows+=("| $loops | ${row%%|*} | $wall | $server | $script | $agent_cpu | $failed |")
    echo "${rows[-1]}" >&2
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# The fleet: one server, many hosts' agents, each agent's clients sending back to back (agent_load,
# threads of one process, so that no process start sets the pace). One state directory per agent
# stands for one host.
FLEET_SECONDS=${BENCH_FLEET_SECONDS:-3}

# The server's count of a stat since it started: stat NAME SECTION (total_reads_processed stats).
server_stat() {
  redis-cli -s "$TMP/redis/sock" info "$2" | tr -d '\r' | sed -n "s/^$1:\([0-9]*\)$/\1/p"
}
# FCALL calls since the last reset (INFO commandstats).
script_calls() {
  redis-cli -s "$TMP/redis/sock" info commandstats |
    sed -n 's/^cmdstat_fcall:calls=\([0-9]*\),.*/\1/p' | grep . || echo 0
}

# fleet_row AGENTS CLIENTS KEYS PATH URL [options...]: AGENTS agent_load processes at once for
# $FLEET_SECONDS, each with CLIENTS connections to the agent of a state directory of its own
# (PATH agent) or to the server itself (PATH direct: --no-agent, each client a kept connection),
# going round KEYS keys. Prints "decisions_per_s server_cpu_us_per_decision
# decisions_per_s_per_server_core script_calls_per_decision script_calls_per_server_read
# agent_cpu_us_per_decision failed".
fleet_row() {
  local agents=$1 clients=$2 keys=$3 path=$4 i state pid agent_before=0 agent_cpu=- pids=()
  local reads_before cpu_before control_before idle
  shift 4
  local states=() agent_pids=()
  for i in $(seq "$agents"); do
    state=$TMP/fleet-$path-${1%%:*}-$i
    if [ "$path" = agent ]; then
      [ -S "$state/agent.sock" ] || warm_agent "$state" "$@"
      agent_pids+=("$(cat "$state/agent.lock")")
    fi
    states+=("$state")
  done
  for pid in "${agent_pids[@]}"; do agent_before=$((agent_before + $(process_cpu "$pid"))); done
  redis-cli -s "$TMP/redis/sock" config resetstat >/dev/null
  reads_before=$(server_stat total_reads_processed stats)
  cpu_before=$(server_cpu)
  control_before=$(server_cpu control)
  for i in $(seq "$agents"); do
    "$AGENT_LOAD" --state-dir "${states[$((i - 1))]}" --rate 1G/s --key fleet --keys "$keys" \
      --clients "$clients" --seconds "$FLEET_SECONDS" --redis "$@" \
      $([ "$path" = direct ] && echo --no-agent) >"$TMP/load.$i" 2>>"$TMP/load.err" &
    pids+=($!)
  done
  wait "${pids[@]}" || true
  local cpu=$(($(server_cpu) - cpu_before))
  idle=$(($(server_cpu control) - control_before))
  local reads=$(($(server_stat total_reads_processed stats) - reads_before)) calls
  calls=$(script_calls)
  if [ "$path" = agent ]; then
    agent_cpu=0
    for pid in "${agent_pids[@]}"; do agent_cpu=$((agent_cpu + $(process_cpu "$pid"))); done
    agent_cpu=$((agent_cpu - agent_before))
  fi
  cat "$TMP"/load.* | tr ' ' '\n' | awk -F= -v cpu="$cpu" -v idle="$idle" -v reads="$reads" \
    -v calls="$calls" -v agent_cpu="$agent_cpu" '
    $1 == "decisions" { n += $2 } $1 == "failures" { failed += $2 }
    $1 == "seconds" && $2 > seconds { seconds = $2 }
    END { server = (cpu - idle) / n; if (server < 0) server = 0
      printf "%.0f %.1f %.0f %.2f %.2f %s %d\n", n / seconds, server, (server > 0 ? 1e6 / server : 0),
        calls / n, calls / reads,
        (agent_cpu == "-" ? "-" : sprintf("%.1f", agent_cpu / n)), failed }'
  rm -f "$TMP"/load.*
}

# kept_row CONNECTIONS KEYS [redis-benchmark connection options...]: the same script calls from
# redis-benchmark on CONNECTIONS kept connections, as many as the row's clients, going round KEYS
# keys (-r); measured as fleet_row measures. 50,000 calls, so that making the connections (TLS
# handshakes included) weighs little against them.
kept_row() {
  local connections=$1 keys=$2 key='ratelimit:{fleet}' random=() reads_before cpu_before
  local control_before idle n=50000 rps
  shift 2
  if [ "$keys" -gt 1 ]; then
    key='ratelimit:{fleet__rand_int__}'
    random=(-r "$keys")
  fi
  redis-cli -s "$TMP/redis/sock" config resetstat >/dev/null
  reads_before=$(server_stat total_reads_processed stats)
  cpu_before=$(server_cpu)
  control_before=$(server_cpu control)
  rps=$(redis-benchmark "$@" -c "$connections" -n "$n" "${random[@]}" "${bucket[@]}" 1 "$key" \
    reserve "" 1 9223372036854775807 "1,bursty,1e9,1,0,3,0,0,0," bursty 0 1e9 1 |
    tr '\r' '\n' | grep -oE '[0-9.]+ requests per second' | tail -1 | awk '{ print $1 }')
  idle=$(($(server_cpu control) - control_before))
  awk -v cpu=$(($(server_cpu) - cpu_before)) -v idle="$idle" -v n="$n" -v rps="$rps" \
    -v calls="$(script_calls)" -v reads=$(($(server_stat total_reads_processed stats) - reads_before)) \
    'BEGIN { server = (cpu - idle) / n
      printf "%.0f %.1f %.0f %.2f %.2f - 0\n", rps, server, (server > 0 ? 1e6 / server : 0), calls / n,
        calls / reads }'
}

fleet_load_before=$(cut -d' ' -f1-3 /proc/loadavg)
fleet_rows=()
for transport in TCP TLS; do
  if [ "$transport" = TCP ]; then
    url=("$TCP_URL")
    benchmark=(-h 127.0.0.1 -p "$port")
  else
    url=("$TLS_URL" --redis-tls-ca "$tls/ca.crt")
    benchmark=(-h localhost -p "$tls_port" --tls --cacert "$tls/ca.crt")
  fi
  for keys in 1 16; do
    for agents in 1 4; do
      for clients in 1 16; do
        echo "== fleet: $transport, $keys key(s), $agents agent(s) x $clients client(s)" >&2
        for path in agent direct kept; do
          case $path in
            agent) row=$(fleet_row "$agents" "$clients" "$keys" agent "${url[@]}") ;;
            direct) row=$(fleet_row "$agents" "$clients" "$keys" direct "${url[@]}") ;;
            kept) row=$(kept_row $((agents * clients)) "$keys" "${benchmark[@]}") ;;
          esac
          fleet_rows+=("| $transport | $keys | $agents | $clients | $path | ${row// / | } |")
          echo "${fleet_rows[-1]}" >&2
        done
      done
    done
  done
done
fleet_load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# The fleet's section, as agent.md holds it.
fleet_section() {
  echo "## The fleet: one server, many hosts' agents"
  echo
  echo "Load average $fleet_load_before before, $fleet_load_after after. Each row: as many"
  echo "\`bench/agent_load\` processes as agents, each with its clients (threads, one connection each)"
  echo "sending \`acquire --rate 1G/s\` requests back to back for $FLEET_SECONDS s, round the keys; each agent"
  echo "has a state directory of its own, as one host. agent: through the agents; direct: the same"
  echo "processes with --no-agent (each client a kept connection to the server); kept: redis-benchmark"
  echo "sending the same script call on as many kept connections. The load generators, the agents"
  echo "and the server share the machine's $(nproc) cores, so decisions/s is this machine's, not a"
  echo "server's. Redis CPU per decision as above; per core: 1e6 over it, the decisions a second one"
  echo "Redis core would make at that cost. Script calls per decision: INFO commandstats's FCALL"
  echo "calls over the decisions; per server read: over INFO's total_reads_processed (how many"
  echo "calls came in one read: pipelined). Agent CPU: all the agents' threads."
  echo
  echo "| transport | keys | agents | clients per agent | path | decisions/s | Redis CPU per decision (us) | decisions/s per Redis core | script calls per decision | script calls per server read | agent CPU per decision (us) | failed |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  printf '%s\n' "${fleet_rows[@]}"
}

if [ -n "${BENCH_FLEET_ONLY:-}" ]; then
  fleet_section
  exit 0
fi
{
  echo "# The host agent"
  echo
  echo "Run by \`scripts/bench_agent.sh\` on $(nproc) cores, $(date -u +%Y-%m-%d), $(redis-server --version | awk '{ print $1, $2, $3 }');"
  echo "load average $load_before before, $load_after after. Loops of \`ratelimit acquire --rate 1G/s\`"
  echo "(never waits) on one key; $CALLS calls in all per row (1 loop), $((CALLS / 8 > 10 ? CALLS / 8 : 10)) per loop with 8, $((CALLS / 64 > 10 ? CALLS / 64 : 10)) per loop with 64."
  echo "Server CPU: INFO's used_cpu_sys + used_cpu_user around the row, less what an idle control"
  echo "server used meanwhile, per decision. The script: INFO commandstats, FCALL's usec_per_call"
  echo "(its duration: on a loaded machine, time preempted included). Wall: the row's time over the"
  echo "calls of one loop. Agent CPU: the agent's time"
  echo "on a CPU, all its threads (/proc/PID/task/*/schedstat), per decision. TCP kept, agent's pace: the same call on one kept"
  echo "connection (redis-cli -r -i) at the pace of the agent's row, what a call costs a server that"
  echo "idles between calls (cold caches) without any connection made. Failed: calls that got no answer (exit 69: the"
  echo "server did not answer within --redis-timeout, 1 s)."
  echo
  echo "| loops | path | wall per call (us) | Redis CPU per decision (us) | of which the script (us) | agent CPU per decision (us) | failed |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
  printf '%s\n' "${rows[@]}"
  echo
  fleet_section
} >"$RESULTS/agent.md"
cat "$RESULTS/agent.md"
