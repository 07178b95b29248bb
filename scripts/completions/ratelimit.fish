# fish completion for ratelimit
set -l commands set exec acquire status reset throttle

# exec's command so far, a word a line, when the word being completed belongs to it: the command
# is the first word after exec's options, or the word after --.
function __ratelimit_exec_command
    set -l words (commandline -opc)
    test (count $words) -ge 2; and test $words[2] = exec; or return 1
    set -l value_options --rate -r --no-quota --burst --warmup --cold-factor --key -k --state-dir --permits \
        --timeout --max-inflight --throttled-status --retry --redis --redis-timeout --redis-failover-timeout --on-redis-error --redis-tls-ca \
        --redis-tls-cert --redis-tls-key
    set -l i 3
    while test $i -le (count $words)
        switch $words[$i]
            case --
                test $i -lt (count $words); and printf '%s\n' $words[(math $i + 1)..-1]
                return 0
            case '-*'
                contains -- $words[$i] $value_options; and set i (math $i + 1)
            case '*'
                printf '%s\n' $words[$i..-1]
                return 0
        end
        set i (math $i + 1)
    end
    # No command yet: the word being completed is the command, unless it is an option or a value.
    string match -q -- '-*' (commandline -ct); and return 1
    contains -- $words[-1] $value_options; and return 1
    return 0
end
complete -c ratelimit -n '__ratelimit_exec_command >/dev/null' -x \
    -a '(complete -C (string join -- " " (__ratelimit_exec_command | string escape) (commandline -ct)))'
set -l own "not __ratelimit_exec_command >/dev/null"
complete -c ratelimit -f -n "not __fish_seen_subcommand_from $commands" -a "$commands"
complete -c ratelimit -n "not __fish_seen_subcommand_from $commands" -F

# Every command
complete -c ratelimit -n "$own" -s h -l help -d 'Print help and exit'
complete -c ratelimit -n "$own" -s V -l version -d 'Print the version and exit'

# Rate options: pipe mode, exec and acquire
set -l with_rate "not __fish_seen_subcommand_from status reset throttle; and $own"
complete -c ratelimit -n "$with_rate" -s r -l rate -x -d 'Rate: units per period, e.g. 5000, 10MiB/s, 2/s'
complete -c ratelimit -n "__fish_seen_subcommand_from set" -l no-quota -x -d "With --key: remove the key's quota of this PERIOD, or all"
complete -c ratelimit -n "__fish_seen_subcommand_from set" -l no-start-full -d "With --key: turn the key's --start-full off"
complete -c ratelimit -n "__fish_seen_subcommand_from set" -l no-pay-first -d "With --key: turn the key's --pay-first off"
complete -c ratelimit -n "$with_rate" -l burst -x -d 'Unused capacity stored for a burst (2s or 64k)'
complete -c ratelimit -n "$with_rate" -l warmup -x -d 'Start cold and ramp up over this duration'
complete -c ratelimit -n "$with_rate" -l cold-factor -x -d 'With --warmup: how much slower a cold start is'
complete -c ratelimit -n "$with_rate" -l start-full -d 'A new bucket holds its whole burst'
complete -c ratelimit -n "$with_rate" -l pay-first -d 'A request waits until its permits exist'
complete -c ratelimit -n "$with_rate" -l quota -x -d 'At most N units in any window of PERIOD, e.g. 5000/h, 50GB/d'

# Pipe mode
set -l pipe "not __fish_seen_subcommand_from $commands"
complete -c ratelimit -n "$pipe" -s o -l output -r -d 'Write here instead of standard output'
complete -c ratelimit -n "$pipe" -s l -l lines -d 'Count lines'
complete -c ratelimit -n "$pipe" -s 0 -l null -d 'Count NUL-terminated records'
complete -c ratelimit -n "$pipe" -l delimiter -x -d 'Count records ended by this character'
complete -c ratelimit -n "$pipe" -l chunk -x -d 'Units per write, or the time between writes (50ms)'
complete -c ratelimit -n "$pipe" -l timeout -x -d 'Wait at most this long for a turn, else exit 75'
complete -c ratelimit -n "$pipe" -l stop-at-quota -d 'Exit 75 when a quota is spent instead of waiting'
complete -c ratelimit -n "$pipe" -s s -l size -x -d 'What the input holds, for the progress percentage'
complete -c ratelimit -n "$pipe" -s p -l progress -d 'Draw a progress line (=force: always)'
complete -c ratelimit -n "$pipe" -l stats -d 'Print a summary at the end (=text, the default; =json: as JSON)'

# Shared buckets
set -l shared "$own"
complete -c ratelimit -n "$shared" -s k -l key -x -d 'Name of the shared bucket (repeat it for several keys)'
complete -c ratelimit -n "$shared" -l state-dir -x -a '(__fish_complete_directories)' -d 'Directory of the bucket files'
complete -c ratelimit -n "$shared" -s v -l verbose -d 'Say why a bucket record was discarded'
complete -c ratelimit -n "$shared" -l redis -x -a 'redis:// rediss:// unix:// redis-sentinel://' -d 'Keep the buckets in Redis'
complete -c ratelimit -n "$shared" -l redis-timeout -x -d 'Give up on Redis after this long'
complete -c ratelimit -n "$shared" -l redis-failover-timeout -x -d 'Wait this long for a Sentinel failover'
complete -c ratelimit -n "$shared" -l redis-tls-ca -r -F -d 'Trust the CAs in this PEM file'
complete -c ratelimit -n "$shared" -l redis-tls-cert -r -F -d 'Client certificate (PEM)'
complete -c ratelimit -n "$shared" -l redis-tls-key -r -F -d 'Private key of the client certificate'
complete -c ratelimit -n "$shared" -l redis-tls-insecure -d 'Do not check the server certificate'
complete -c ratelimit -n "__fish_seen_subcommand_from exec acquire; and $own; or $pipe" -l on-redis-error -x -a 'fail allow local' -d 'If Redis cannot answer'
complete -c ratelimit -n "__fish_seen_subcommand_from exec acquire; and $own; or $pipe" -l no-agent -d 'Connect to Redis from this process, not through the host agent'
set -l taking "__fish_seen_subcommand_from exec acquire; and $own"
complete -c ratelimit -n "$taking" -l permits -x -d 'Permits to take'
complete -c ratelimit -n "$taking" -l try -d 'Never wait: exit 75 if no permit is free'
complete -c ratelimit -n "$taking" -l timeout -x -d 'Wait at most this long'
complete -c ratelimit -n "__fish_seen_subcommand_from exec; and $own" -l max-inflight -x -d 'At most this many commands of the key at once'
complete -c ratelimit -n "__fish_seen_subcommand_from exec; and $own" -l throttled-status -x -d 'Exit statuses that mean the service said too many'
complete -c ratelimit -n "__fish_seen_subcommand_from exec; and $own" -l retry -x -d 'Run again at most N times after a throttled status'
complete -c ratelimit -n "__fish_seen_subcommand_from throttle" -l retry-after -x -d 'The service\'s Retry-After: seconds or an HTTP date'
complete -c ratelimit -n "__fish_seen_subcommand_from throttle" -l max-pause -x -d 'The longest pause one Retry-After may ask for'
complete -c ratelimit -n "__fish_seen_subcommand_from set" -x -a '(__fish_complete_pids)'
complete -c ratelimit -n "__fish_seen_subcommand_from status" -l json -d 'Print one JSON object, for scripts'
