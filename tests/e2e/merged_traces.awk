# The pipes of one key as their readers saw them: input lines "seconds units pipe", one per read,
# sorted by time; -v rate=UNITS_PER_SECOND -v pipes=N. Prints "rate=R error=E% window=W turn=T"
# and, for several pipes, "busy=B share_I=S%..." (each pipe's share of the units read while all
# were busy, from the last pipe's first read to the first pipe's last). Shared by
# test_pipe_shared_key_four.sh and scripts/bench_shared.sh.
# window: the worst 100 ms as a multiple of the rate x 0.1 s. turn: the mean time from one write
# to the next, whichever pipe's (reads of one pipe within 5 ms are one write, a chunk that a pipe's
# capacity split).
{
  time[NR] = $1; units[NR] = $2; pipe[NR] = $3; total += $2
  if (!(($3) in first)) first[$3] = $1
  if (!(($3) in last) || $1 - last[$3] > 0.005) write_time[++writes] = $1
  last[$3] = $1
}
END {
  # The first read and the last, a part of a chunk, left out: a chunk counted over the time to
  # the last read would understate the rate by nearly a chunk.
  steady = (total - units[1] - units[NR]) / (time[NR - 1] - time[1])
  start = 0; sum = 0; worst = 0
  for (i = 1; i <= NR; i++) {
    sum += units[i]
    while (time[i] - time[start + 1] >= 0.1) sum -= units[++start]
    if (sum > worst) worst = sum
  }
  busy_from = 0; busy_to = 1e300
  for (p in first) { if (first[p] > busy_from) busy_from = first[p]; if (last[p] < busy_to) busy_to = last[p] }
  for (i = 1; i <= NR; i++) if (time[i] >= busy_from && time[i] <= busy_to) { share[pipe[i]] += units[i]; busy += units[i] }
  printf "rate=%.0f error=%+.2f%% window=%.3f", steady, (steady / rate - 1) * 100, worst / (rate * 0.1)
  if (writes > 1) printf " turn=%.1fms", 1000 * (write_time[writes] - write_time[1]) / (writes - 1)
  # No shares when one pipe ended before the last began (a loaded machine's late start).
  if (pipes > 1) { printf " busy=%.2fs", busy_to - busy_from; if (busy > 0) for (p = 0; p < pipes; p++) printf " share_%d=%.1f%%", p, 100 * share[p] / busy }
  printf "\n"
}
