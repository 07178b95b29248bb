-- One shared bucket decided atomically on the Redis server, with the server's clock (TIME).
-- A Redis function library (Redis 7.0 or later): the build puts two lines before this file that
-- name the library and FUNCTION_NAME, its one function, after the file's SHA-1
-- (src/stores/redis/redis_script.cpp.in), and the store loads it where FCALL finds none. KEYS and
-- ARGV below are FCALL's keys and arguments, which bucket() (at the end) gets as `keys` and
-- `argv`.
--
-- This is src/core/token_bucket.cpp, Quota and QuotaBucket of src/core/quota.cpp, and decide()
-- and change_rate() of src/stores/bucket_store.cpp, operation for operation and in the same
-- order, so that the same state and times reach the same decisions (tests/redis/ replays the
-- golden vectors through it). Lua numbers are doubles: times are kept as whole seconds plus
-- nanoseconds, and computed in nanoseconds relative to the current second, where every integer
-- below 2^53 (104 days) is exact; an entry's end (Unix seconds, any int64) is kept and compared as
-- decimal text. Quota slots are counted on Unix microseconds (slot i covers [i * L, (i + 1) * L)
-- for a slot length of L microseconds), so slot numbers, counts and limits are whole numbers below
-- 2^53: exact.
--
-- KEYS[1]  ratelimit:{NAME}, a hash: v, shape, rate, burst, warmup, cold, start_full, pay_first
--          (the parameters as the client wrote them; the last two "0" when absent), stored,
--          free_s, free_ns (the next free moment, Unix time), timetable, entry_until (the key's
--          schedule; "" and "0" when absent, as in keys written before timetables), expires (the
--          expiry last set, Unix milliseconds on the server's clock; absent or "0": none noted),
--          texts (the format version, the parameters' texts, entry_until and timetable joined by
--          commas, so that the common call compares them in one field; absent in keys written
--          before it was, which are read field by field and given it). An older ratelimit leaves
--          `texts` as it was when it changes the parameters: the common call also compares
--          `rate`, which every such change but one of burst, warm-up or shape alone rewrites.
--          notation: how the rate of the parameters was written (format::notation_text(), shown
--          by `status`), kept outside `texts` so that the common call neither sends nor
--          compares it; absent or "": none.
--          A key with quotas also holds quotas (LIMIT/PERIOD/SLOT for each: the limit, the period
--          in nanoseconds and the slot length in microseconds, joined by blanks, as in the
--          caller's texts) and quota_counts (a JSON array with one array per quota: its newest
--          slot, then the 66 counts of the slots up to it, oldest first: QuotaState); its texts
--          hold the quotas, so that a caller with other quotas, or none, is no common call. Keys
--          written before quotas have neither field and no quotas. An older ratelimit (no
--          --quota) on a key with quotas neither waits for them nor counts its grants in them, and
--          leaves both fields as they are (and `texts` without the quotas, which the next call
--          with them writes again); it may move the key's expiry nearer, to its rate's alone.
--          Beside quota_counts, written with it: quota_sums (each quota's sum of counts, joined
--          by blanks) and quota_sums_of (the quota_counts they are the sums of), so that the
--          common call reads a quota's sum, newest slot and last count instead of decoding and
--          writing again all its counts: the sums count only while quota_sums_of is the key's
--          quota_counts. A ratelimit that wrote quota_counts without them (before they were, or
--          one with quotas that predates them, which still reads and writes quota_counts as
--          here) leaves them behind, and the next call reads every count and writes them again.
--          quota_passed, written when a booking shifts the counts: each quota's newest slot and
--          QuotaState::passed joined by a colon, joined by blanks (only `status` uses them); one
--          whose newest slot is not its quota_counts' is 0 (a ratelimit before them shifted it).
--          backoff, only on a key once throttled: its back-off (BackoffState; the block of
--          backoff_ functions below says how it is written); reserve and status read it in their
--          first HMGET, and only `throttle` writes it. A ratelimit before it ignores it.
-- Positions below are named as in redis_script_protocol.hpp, whose encoder and decoder use them.
-- ARGV[1]  kArgOperation: "reserve", "reserve_keeping", "status", "set_rate", "give_back",
--          "throttle" (kThrottleOperation), "batch" (kBatchOperation) or "reserve_all"
--          (kReserveAllOperation, several keys)
-- ARGV[2]  kArgTime: the time in Unix microseconds for tests, or "" for the server's TIME (each
--          operation's but batch's)
-- reserve and reserve_keeping (which keeps the parameters of a bucket kept with others where
--          reserve applies the caller's): ARGV[3] kArgPermits; ARGV[4] kArgTimeout nanoseconds,
--          then " quota" (kQuotaWaitRefused) when a wait that a quota sets is refused too;
--          ARGV[5] kArgTexts, the caller's texts, as the key keeps them: the format version,
--          shape ("bursty" or "warming_up"), permits per second, max burst seconds, warm-up
--          nanoseconds, cold factor, start full and pay first ("0" or "1"), the end of the
--          timetable's entry the rate comes from (decimal Unix seconds, "0" for none) and the
--          timetable ("" for none), joined by commas, with the quotas (as `quotas` keeps them)
--          before the entry's end if there are any; then those of them that the common call
--          computes with: ARGV[6] kArgShape, ARGV[7] kArgPayFirst, ARGV[8] kArgRate (permits per
--          second), and ARGV[9] kArgBurst, max burst seconds (bursty) or ARGV[9] kArgWarmup,
--          ARGV[10] kArgCold, warm-up nanoseconds and cold factor (warming_up); then from
--          ARGV[10] kArgFirstQuotaBursty or ARGV[11] kArgFirstQuotaWarmingUp each quota's limit
--          and slot length in microseconds, two arguments each (none for a key without quotas:
--          it costs what it did before quotas). A request goes at the later of the rate's
--          moment and every quota's, and takes nothing from any when refused; a reserve with
--          other quotas than the key's replaces them (a new quota keeps the counts of the key's
--          quota of the same period), and `reset` (DEL) clears them. Last and optional (an odd
--          argument after the quotas' pairs), the caller's notation, which both write with the
--          caller's parameters to a new key, and reserve in place of the key's (a replacement
--          without one leaves ""), and which is otherwise not read.
--          Returns, when the key holds the caller's rate and timetable after the call and no
--          record was discarded, the wait in ns alone if granted (Redis turns a table into a
--          reply at several times the cost of a text), else {0, wait ns} (kAsRequestedFields);
--          else a table of kKeptFields: [1] kReplyGranted 0|1, [2] kReplyWait, [3]
--          kReplyReplaced 0|1 (parameters replaced), [4] kReplyProblem (why the record was
--          discarded, "" if not), [5] kReplyKeyTimetable and [6] kReplyKeyRate (the key's after
--          the call); when replaced (kReplyReplaced 1), kReplacedFields: then [7..13]
--          kReplyReplacedParams (as status gives them), [14] kReplyReplacedTimetable and [15]
--          kReplyReplacedQuotas (as `quotas` keeps them); when reserve_keeping's caller asked for
--          other settings than the key's, which it follows (kReplyReplaced 2, kReplyFollowedTold,
--          when it is to say so; else 3, kReplyFollowed), the same fields hold the key's settings
--          after the call. A granted wait is followed in its text by the booking's span
--          (BookingSpan of bucket_store.hpp): the next free moment it found and the one it
--          left, as integer Unix nanoseconds, blank-separated ("WAIT FROM UNTIL"); a wait that
--          a quota, not the rate, sets ends in " quota" ("WAIT quota", "WAIT FROM UNTIL quota").
--          On a key once throttled, decided at its rate in force and not before its pause ends,
--          the wait text then ends in " backoff PAUSED" (kWaitBackoff: the pause left, ns).
-- status:  returns nil without a bucket, {"unusable", why} (kUnusableFields) for a record that
--          cannot be used, else kStatusFields: [1..7] kStatusParams (shape, rate, burst, warmup,
--          cold, start_full, pay_first: kParamShape...kParamPayFirst from there), [8]
--          kStatusStored (stored permits now), [9] kStatusNextFreeIn (ns until the next free),
--          [10] kStatusTimetable, [11] kStatusEntryUntil, [12] kStatusNotation ("" for none), [13]
--          kStatusBackoff; then kQuotaFields for each quota: kQuotaLimit, kQuotaPeriod (ns),
--          kQuotaUsed (units used in the window a request now counts against) and
--          kQuotaNextFreeIn (ns until one more unit may go). kStatusBackoff: "" for a key never
--          throttled, else its rate in force, the pause left (ns), the throttles and the time
--          since the last (ns), blank-separated; the stored permits and next free moment are
--          then those in force.
-- set_rate: ARGV[3] kArgNewRate, ARGV[4] kArgNewTimetable, ARGV[5] kArgNewEntryUntil (the new
--          timetable's entry's end); returns nil without a bucket, else 1. Optional, ARGV[6]
--          kArgNewSettings: all the key's settings from now on, as reserve's kArgTexts (rate and
--          timetable those of ARGV[3..5]); a key without a bucket is then made with them (1).
--          Either way the key is kept (KEPT_MS) and its `noticed` emptied.
-- give_back: ARGV[3] kArgGivenBack, permits booked and not used (give_back() of
--          bucket_store.cpp); ARGV[4] kArgBookedFrom and ARGV[5] kArgBookedUntil, optional, the
--          span of the bookings they come from, as reserve gave it: only what no later booking
--          has built on goes back. Returns nil without a bucket, else 1 if the next free moment
--          moved, 0 if not.
-- throttle: ARGV[3] kArgSentBefore, ARGV[4] kArgRetryAfter (ns, "0": none): a report of "too
--          many" (record_throttle_report() of bucket_store.cpp). Returns nil without a bucket,
--          else kThrottleFields: [1] 1 if it cut the rate (a new event), [2] 1 if the pause grew,
--          [3] the pause left (ns), [4] the rate in force after it.
-- batch:   several requests on the key in one call (the host agent's, for those that come
--          together): from ARGV[2], each request's arguments as it would send them alone (from
--          its kArgOperation on), after their count. Each is served in turn as if alone, the
--          server's TIME read for each; returns a table of their replies, in order: a nil reply
--          as nil (false in the table, which keeps its length), and a request that fails (bad
--          arguments, a redis.call() refused) has its error as its reply while the others go on.
-- Waits are strings of integer nanoseconds: a Lua number in a reply is truncated to an integer.
--
-- FUNCTION LOAD runs this body once: every function below, and the tables of functions
-- (backoff_lib, quota_lib, bucket_methods), are made then, not per call. serve() runs once per
-- request and serves the common call (a reserve on a key that holds the caller's parameters and
-- schedule) with its bucket in locals rather than tables; serve_uncommon() serves the other calls.
-- A request alone is served with ARGV as it came, no table made for it. A call of a function
-- costs about as much as a global read (bench_script_instructions.sh: some 400 to 1000
-- instructions, with its arguments and results), so the common call's pieces are few: serve(),
-- book_request() and save(), and what they call. Each argument costs the server on every call,
-- and so does splitting a text: the caller's parameters and schedule come as one text, compared
-- with the key's at once, and only those the common call computes with come apart as well.

-- The library functions the script calls, read from the globals once, on the first call
-- (bucket(), below): FUNCTION LOAD runs this body with no globals at all, and a global read costs
-- a call about 400 instructions where an upvalue's costs a few (bench_script_instructions.sh).
-- globals_used() and register() come before the names below hide the globals they read.
local function globals_used()
  return math.huge, math.floor, math.ceil, math.min, math.max, math.fmod, string.format,
         string.sub, string.find, string.match, string.rep, table.concat, tonumber, tostring, type,
         unpack, select, pcall, setmetatable, cjson, redis
end
local function register(name, callback) redis.register_function(name, callback) end
local huge, floor, ceil, min, max, fmod, format, sub, find, match, rep, concat, tonumber, tostring
local type, unpack, select, pcall, setmetatable, cjson, redis

-- The constants.
local NS_PER_S = 1e9
local REP_LIMIT = 9223372036854775808 -- 2^63; stands for the saturated int64 maximum as well
local FORMAT_VERSION = "1"
-- A key expires this long or up to twice as long after the bucket would be full again and its
-- quotas' slots have all passed: an idle key vanishes. The expiry is set a margin further than it
-- must be, and noted in the hash (expires, Unix milliseconds), so that a busy key's expiry is
-- moved about once per margin, not on every call.
local EXPIRY_MARGIN_MS = 1000
-- A key that owns settings some caller does not pass (it told one that it follows them: field
-- `noticed`), or that `ratelimit set --key` changed, is kept this long after its last call, so
-- that its settings outlive its bucket's idle expiry; its expiry is moved about once per
-- KEPT_MARGIN_MS.
local KEPT_MS = 7 * 86400 * 1000
local KEPT_MARGIN_MS = 3600 * 1000
-- Beyond this (about 3000 years) a key is kept without expiry.
local MAX_EXPIRY_MS = 1e14
-- kQuotaCounts of include/ratelimit/quota.hpp: the slots a quota counts, its window's and two.
local QUOTA_COUNTS = 66
-- The most quotas a key keeps, as the state file's record.
local MOST_QUOTAS = 64

-- The bucket's arithmetic that every call needs.

-- A duration or time in nanoseconds that is not negative, as the core truncates it to int64:
-- toward zero, NaN as 0, saturating at 2^63.
local function whole_ns(value)
  if value ~= value then return 0 end
  return min(floor(value), 2 ^ 63)
end

-- A whole number of nanoseconds as std::to_string writes the int64 it stands for.
local function integer_string(value)
  if value == 0 then return "0" end
  if value >= 2 ^ 63 then return "9223372036854775807" end
  return format("%.0f", value)
end

-- TokenBucket::derive(): stable interval, max permits, cool-down interval, threshold, slope.
local function derive(shape, rate, burst, warmup_ns, cold)
  local stable = 1e9 / rate
  if shape == "bursty" then
    if burst == 0 then return stable, 0, stable, 0, 0 end
    return stable, burst * rate, stable, 0, 0
  end
  if warmup_ns == 0 then return stable, 0, stable, 0, 0 end
  if stable == 0 then return stable, huge, 0, huge, 0 end
  local cold_interval = stable * cold
  local threshold = 0.5 * warmup_ns / stable
  local max_permits = threshold + 2.0 * warmup_ns / (stable + cold_interval)
  local warmup_permits = max_permits - threshold
  local slope = 0
  if warmup_permits > 0 and warmup_permits < huge then
    slope = (cold_interval - stable) / warmup_permits
  end
  return stable, max_permits, warmup_ns / max_permits, threshold, slope
end

-- The state in `f`, HMGET's reply (stored, free_s, free_ns and expires at 2 to 5), of a bucket
-- that holds up to max_permits: stored, the next free moment's seconds and nanoseconds, and
-- expires (0: none noted, in keys written before expiries were, or kept without expiry); nil if
-- a bucket cannot hold them (NaN or infinite permits or times would keep the key from expiring or
-- refuse every call). `now_s_text`: TIME's seconds as the server wrote them, or nil. tonumber(),
-- not arithmetic, though it parses a text twice: a field changed by hand to a text that is no
-- number makes a damaged bucket, not a script error on every call.
local function read_state(f, max_permits, now_s, now_s_text)
  local stored, free_s, free_ns, expires = tonumber(f[2]), f[3], tonumber(f[4]),
                                           tonumber(f[5] or "0")
  -- A busy key's next free moment is mostly in the current second, whose text TIME gave.
  if free_s == now_s_text then free_s = now_s else free_s = tonumber(free_s) end
  -- x % 1 == 0: whole, once the bounds before it have excluded the infinities. 9223372037: the
  -- latest next free moment, in Unix seconds (the int64 maximum of nanoseconds).
  -- Never more than the bucket holds (infinite only where it holds that much); a rescale may
  -- round a full bucket a little above.
  if stored and stored >= 0 and free_s and free_s >= 0 and free_s <= 9223372037 and
      free_s % 1 == 0 and expires and expires >= 0 and expires < huge and free_ns and
      free_ns >= 0 and free_ns < 1e9 and free_ns % 1 == 0 and
      stored <= max_permits * (1 + 1e-9) then
    return stored, free_s, free_ns, expires
  end
end

-- Backing off together (include/ratelimit/backoff.hpp and src/core/backoff.cpp, operation for
-- operation): kBackoffCut, kBackoffConvergence, kBackoffFloor and kBackoffRecovery in
-- nanoseconds. A key once throttled holds `backoff`: its pause's end, its event's start, the rate
-- before the cut, the throttles and the last one's time, joined by blanks, the times as integer
-- Unix nanoseconds; keys never throttled have none and cost one more HMGET field. Times below
-- are nanoseconds after now_s, as in serve(); these functions capture nothing of it. They are
-- used by the calls on a key once throttled and by throttle, through the table backoff_lib.
local BACKOFF_CUT = 0.5
local BACKOFF_CONVERGENCE = (1 + BACKOFF_CUT) / 2
local BACKOFF_FLOOR = 0.01
local BACKOFF_RECOVERY_NS = 5e9

-- A mark as integer Unix nanoseconds in a text, as nanoseconds after now_s; nil if it is none.
local function backoff_time_of(text, now_s)
  if not (text and text:find("^%d+$")) then return nil end
  if #text <= 15 then return tonumber(text) - now_s * 1e9 end
  return (tonumber(text:sub(1, -10)) - now_s) * 1e9 + tonumber(text:sub(-9))
end

-- A time after now_s as integer Unix nanoseconds (0 for the epoch or before).
local function backoff_time_text(t, now_s)
  local ns = fmod(t, 1e9)
  if ns < 0 then ns = ns + 1e9 end
  local s = now_s + floor((t - ns) / 1e9 + 0.5)
  if s < 0 then return "0" end
  if s == 0 then return format("%d", ns) end
  return format("%d%09d", s, ns)
end

-- The key's `backoff` text as a table (BackoffState); nil when absent or damaged (a key whose
-- back-off cannot be read is decided as one never throttled).
local function backoff_read(text, now_s)
  if type(text) ~= "string" then return nil end
  local paused, event, rate, throttles, last =
    text:match("^(%d+) (%d+) ([^ ]+) (%d+) (%d+)$")
  local b = {paused_until = backoff_time_of(paused, now_s),
             event_at = backoff_time_of(event, now_s), rate_before_cut = tonumber(rate),
             throttles = tonumber(throttles), last_throttle = backoff_time_of(last, now_s)}
  if not (b.paused_until and b.event_at and b.rate_before_cut and b.rate_before_cut >= 0 and
          b.throttles and b.throttles >= 1 and b.last_throttle) then
    return nil
  end
  return b
end

local function backoff_text(b, now_s)
  return backoff_time_text(b.paused_until, now_s) .. " " ..
         backoff_time_text(b.event_at, now_s) .. " " .. format("%.17g", b.rate_before_cut) ..
         " " .. format("%.0f", b.throttles) .. " " .. backoff_time_text(b.last_throttle, now_s)
end

-- resumed_at()
local function backoff_resumed_at(b)
  return max(b.event_at, b.paused_until)
end

-- rate_in_force()
local function backoff_rate_in_force(b, configured, now)
  if not (b.rate_before_cut > 0) then return configured end
  local below = 1 - max(now - backoff_resumed_at(b), 0) / BACKOFF_RECOVERY_NS
  local curve = b.rate_before_cut * (1 - (1 - BACKOFF_CUT) * (below * below * below))
  return min(configured, max(configured * BACKOFF_FLOOR, curve))
end

-- record_throttle() of a request sent at `sent_at`, with a Retry-After of `retry_after` ns (0:
-- none), on a bucket whose state is `stored`, `next_free`: that state after it, whether it was a
-- new event and whether the pause was extended. `b`: the key's back-off, or nil, changed in place
-- (the table returned). `max_time`: the int64 maximum as a time.
local function backoff_record(b, stored, next_free, configured, sent_at, retry_after, now,
                              now_s, max_time)
  -- Never throttled: BackoffState's zeros, the epoch.
  local epoch = -now_s * 1e9
  b = b or {paused_until = epoch, event_at = epoch, rate_before_cut = 0, throttles = 0,
            last_throttle = epoch}
  local new_event, extended = false, false
  -- nil: the event's pause has ended, and a late report of its 429s holds nobody back again.
  local pause_from = now
  if b.rate_before_cut > 0 and sent_at < b.event_at then
    if b.paused_until > b.event_at and now >= b.paused_until then
      pause_from = nil
    else
      pause_from = b.event_at
    end
  else
    new_event = true
    local before_recovered = b.rate_before_cut > 0 and
                             now - backoff_resumed_at(b) < BACKOFF_RECOVERY_NS
    b.rate_before_cut = backoff_rate_in_force(b, configured, now) *
                        (before_recovered and BACKOFF_CONVERGENCE or 1)
    b.event_at = now
    stored, next_free = 0, max(next_free, now)
  end
  if retry_after > 0 and pause_from then
    local until_ = min(pause_from + retry_after, max_time)
    if until_ > b.paused_until and until_ > now then
      b.paused_until, extended = until_, true
    end
  end
  if next_free < b.paused_until then stored, next_free = 0, b.paused_until end
  b.throttles, b.last_throttle = b.throttles + 1, now
  return b, stored, next_free, new_event, extended
end

-- When the key's rate in force is back at `configured` and its pause over (a time after now_s):
-- its idle expiry waits for it, or the key would forget its back-off and run at the full rate
-- again. Past K the curve of backoff_rate_in_force() reaches `configured` once
-- (t/K - 1)^3 >= (configured/W - 1) / (1 - kBackoffCut).
local function backoff_recovered_at(b, configured)
  if not (b.rate_before_cut > 0) then return b.paused_until end
  local beyond = max(configured / b.rate_before_cut - 1, 0) / (1 - BACKOFF_CUT)
  -- An infinite rate is back at once.
  if not (beyond < huge) then beyond = 0 end
  return backoff_resumed_at(b) + BACKOFF_RECOVERY_NS * (1 + beyond ^ (1 / 3))
end

-- bucket_in_force()'s state: no credit during a pause, and the rate in force.
local function backoff_in_force(b, stored, next_free, configured, now)
  if next_free < b.paused_until then stored, next_free = 0, b.paused_until end
  return stored, next_free, backoff_rate_in_force(b, configured, now)
end

local backoff_lib = {read = backoff_read, text = backoff_text,
                     rate_in_force = backoff_rate_in_force, record = backoff_record,
                     recovered_at = backoff_recovered_at, in_force = backoff_in_force}

-- Quota of src/core/quota.cpp on a state table (the newest slot at 1, the counts at 2 to 67, the
-- oldest first), and the quotas' fields of a key, for the calls on quotas and those that read a
-- key field by field, through the table quota_lib. Times are nanoseconds after
-- now_s, not negative; slots are counted on Unix microseconds, whole numbers below 2^53 until the
-- year 2255, so that slot arithmetic is exact (fmod is).
-- Quota::slot_of(): whole microseconds, then slots of `slot` microseconds.
local function quota_slot_at(t, slot, now_s)
  local us = now_s * 1e6 + floor(t / 1000)
  return (us - fmod(us, slot)) / slot
end

-- Quota(params, now): the newest slot now's, the counts 0.
local function quota_fresh(slot, now, now_s)
  local state = {quota_slot_at(now, slot, now_s)}
  for j = 2, 67 do state[j] = 0 end
  return state
end

-- Quota::earliest(): the first moment not before `from` at which `units` (at most `limit`)
-- may be granted.
local function quota_earliest(limit, slot, state, units, from, now_s)
  local newest = state[1]
  local d = min(max(quota_slot_at(from, slot, now_s), newest) - newest, 66)
  local held = 0
  for j = d + 2, 67 do held = held + state[j] end
  while held + units > limit and d < 66 do
    held = held - state[d + 2]
    d = d + 1
  end
  return max(from, ((newest + d) * slot - now_s * 1e6) * 1000)
end

-- Quota::book(), booked at `now`.
local function quota_book(slot, state, units, at, now_s, now)
  local newest = state[1]
  local booked_slot = max(quota_slot_at(at, slot, now_s), newest)
  local shift = booked_slot - newest
  if shift > 0 then
    -- The counts shifted out that now's window holds (count j holds slot newest - 67 + j).
    local now_slot = quota_slot_at(min(now, at), slot, now_s)
    local passed = newest > now_slot and (state.passed or 0) or 0
    for j = max(now_slot - newest, 0) + 2, min(shift, 66) + 1 do
      passed = passed + state[j]
    end
    state.passed = passed
  end
  if shift >= 66 then
    for j = 2, 67 do state[j] = 0 end
  elseif shift > 0 then
    for j = 2, 67 - shift do state[j] = state[j + shift] end
    for j = 68 - shift, 67 do state[j] = 0 end
  end
  state[1] = booked_slot
  state[67] = state[67] + units
end

-- Quota::used(): the counts of now's window, and those passed while it is before the newest.
local function quota_used(limit, slot, state, now, now_s)
  local d = quota_slot_at(now, slot, now_s) - state[1]
  local held = d < 0 and (state.passed or 0) or 0
  for j = max(d, 0) + 2, min(d + 65, 65) + 2 do
    held = held + state[j]
  end
  return min(held, limit)
end

-- Whether every quota of `marks` (its limits and slot lengths in `limits` and `slots`) grants
-- `units` at `at` as Quota::earliest() does when it holds them in its newest slot: `at` is in
-- that slot (earliest() then returns `at`), and the sum of all its counts leaves room for them
-- (below 2^53, so exact). Then Quota::book() adds them to the newest count, shifting nothing.
local function quota_marks_allow(marks, units, at, limits, slots, now_s)
  for i = 1, #limits do
    if marks.sum[i] + units > limits[i] or
        quota_slot_at(at, slots[i], now_s) ~= marks.newest[i] then
      return false
    end
  end
  return true
end

-- The quotas' fields of a key (quota_counts, quota_sums, quota_passed) read and written.
-- The quotas' states in `text` (the key's quota_counts: a JSON array of one array per quota,
-- its newest slot then its counts) if it holds `count` of them made of whole numbers; else nil.
-- Digits, commas and brackets only, each bracket a quota's or the whole's: cjson then makes
-- numbers and tables where the arithmetic expects them.
local function quota_states_of(text, count)
  if type(text) ~= "string" or not text:find("^%[[%d,%[%]]*%]$") then return nil end
  local _, brackets = text:gsub("%[", "")
  if brackets ~= count + 1 then return nil end
  local decoded, states = pcall(cjson.decode, text)
  if not (decoded and type(states) == "table" and #states == count) then return nil end
  for i = 1, count do
    local state = states[i]
    if type(state) ~= "table" or #state ~= 67 then return nil end
  end
  return states
end

-- Each quota's passed count (QuotaState::passed) from `text` (the key's quota_passed: for each
-- quota, its newest slot and passed count joined by a colon, joined by blanks) into `states`:
-- only where the newest slot is the state's, so that counts an older ratelimit shifted without
-- it count none passed.
local function quota_passed_into(states, text)
  if type(text) ~= "string" then return end
  local i = 0
  for newest, passed in text:gmatch("(%d+):(%d+)") do
    i = i + 1
    if states[i] and tonumber(newest) == states[i][1] then states[i].passed = tonumber(passed) end
  end
end

-- Each quota's newest slot, last count (and where it is written: last_at, close) and the sum of
-- its counts, read from `text` (the key's quota_counts) and `sums` (its quota_sums) without
-- decoding every count; nil unless both hold `count` quotas. Only for a text the script wrote
-- and checked (quota_sums_of equals it): its numbers need no more checks.
local function quota_marks_of(text, sums, count)
  local marks = {text = text, newest = {}, last = {}, last_at = {}, close = {}, sum = {}}
  local at = 2
  for i = 1, count do
    local newest = text:match("^%[(%d+),", at)
    local close = text:find("]", at, true)
    if not (newest and close) then return nil end
    -- The last count has at most 16 digits (below 2^53).
    local last_at, last = text:match("()(%d+)%]", max(at, close - 17))
    if not (last_at and last_at + #last == close) then return nil end
    marks.newest[i], marks.last[i], marks.last_at[i], marks.close[i] =
      tonumber(newest), tonumber(last), last_at, close
    at = close + 2
  end
  if at ~= #text + 1 then return nil end
  local i = 0
  for sum in sums:gmatch("%d+") do
    i = i + 1
    marks.sum[i] = tonumber(sum)
  end
  if i ~= count then return nil end
  return marks
end

-- The key's quota_counts, every number with all its digits, its quota_sums: each quota's
-- sum of counts, joined by blanks, and its quota_passed.
local function quota_counts_text(states)
  local counts_format = "[" .. rep("%.0f,", 66) .. "%.0f]"
  local texts, sums, passed = {}, {}, {}
  for i = 1, #states do
    local state = states[i]
    texts[i] = format(counts_format, unpack(state))
    local sum = 0
    for j = 2, 67 do sum = sum + state[j] end
    sums[i] = format("%.0f", sum)
    passed[i] = format("%.0f:%.0f", state[1], state.passed or 0)
  end
  return "[" .. concat(texts, ",") .. "]", concat(sums, " "),
         concat(passed, " ")
end

-- quota_counts_text() after `units` were booked in every quota's newest slot: the key's text
-- with each last count replaced, the rest as it is.
local function quota_marks_booked(marks, units)
  local text, pieces, sums, from = marks.text, {}, {}, 1
  for i = 1, #marks.newest do
    pieces[2 * i - 1] = text:sub(from, marks.last_at[i] - 1)
    pieces[2 * i] = format("%.0f", marks.last[i] + units)
    sums[i] = format("%.0f", marks.sum[i] + units)
    from = marks.close[i]
  end
  pieces[#pieces + 1] = text:sub(from)
  return concat(pieces), concat(sums, " ")
end

local quota_lib = {slot_at = quota_slot_at, fresh = quota_fresh, earliest = quota_earliest,
                   book = quota_book, used = quota_used, marks_allow = quota_marks_allow,
                   states_of = quota_states_of, passed_into = quota_passed_into,
                   marks_of = quota_marks_of, counts_text = quota_counts_text,
                   marks_booked = quota_marks_booked}

-- What the calls that are not the common one read and write of a key's settings, and the methods
-- through which they change its bucket.

-- Whether `text` is an int64 as std::to_string writes it: the only form compared below.
local function is_int64_text(text)
  if text == "0" then return true end
  if type(text) ~= "string" then return false end
  local digits = text:match("^%-?([1-9]%d*)$")
  if digits == nil then return false end
  if #digits ~= 19 then return #digits < 19 end
  if text:sub(1, 1) == "-" then return digits <= "9223372036854775808" end
  return digits <= "9223372036854775807"
end

-- Parameters given as the texts the client sent (shape, rate, burst, warmup, cold, start_full,
-- pay_first, the hash's order): [1..7] their texts, and their values; nil if they are no
-- bucket's.
local function params_table(shape, rate, burst, warmup, cold, start_full, pay_first)
  if (start_full ~= "0" and start_full ~= "1") or (pay_first ~= "0" and pay_first ~= "1") or
      (shape ~= "bursty" and shape ~= "warming_up") then
    return nil
  end
  local rate_value, burst_value, warmup_value, cold_value =
    tonumber(rate), tonumber(burst), tonumber(warmup), tonumber(cold)
  -- Only the rate may be infinite (no limit); NaN fails every comparison.
  if not (rate_value and rate_value > 0 and
          burst_value and burst_value > -huge and burst_value < huge and
          warmup_value and warmup_value > -huge and warmup_value < huge and
          cold_value and cold_value > -huge and cold_value < huge) then
    return nil
  end
  if shape == "bursty" and not (burst_value >= 0) then return nil end
  if shape == "warming_up" and
      (start_full == "1" or not (warmup_value >= 0 and cold_value >= 1)) then
    return nil
  end
  return {shape, rate, burst, warmup, cold, start_full, pay_first,
          start_full = start_full == "1", pay_first = pay_first == "1", rate = rate_value,
          burst = burst_value, warmup = warmup_value, cold = cold_value}
end

-- Quotas written as `quotas` keeps them, LIMIT/PERIOD/SLOT (limit and period as QuotaParams,
-- the period in nanoseconds, and the slot length in microseconds as Quota derives it), joined
-- by blanks, in the caller's order: {limits, periods, slots}, or nil if that is not what the
-- text holds.
local function quota_specs_of(text)
  local limits, periods, slots, rebuilt = {}, {}, {}, {}
  for limit, period, slot in text:gmatch("([^ /]*)/([^ /]*)/([^ /]*)") do
    local i = #limits + 1
    limits[i], periods[i], slots[i] = tonumber(limit), period, tonumber(slot)
    -- Whole numbers written without leading zeros: equal quotas have equal texts.
    if not (limit:find("^[1-9]%d*$") and period:find("^[1-9]%d*$") and
            slot:find("^[1-9]%d*$") and limits[i] <= 2 ^ 53 and i <= MOST_QUOTAS) then
      return nil
    end
    rebuilt[i] = limit .. "/" .. period .. "/" .. slot
  end
  if concat(rebuilt, " ") ~= text then return nil end
  return {limits, periods, slots}
end

-- The key's `texts`: the format version, its parameters' texts (params_table() has found none
-- holds a comma), its quotas if it has any, and its schedule, joined, the timetable last, as
-- the caller sends its own. A key without quotas has the texts of keys written before them.
local function joined_texts(p, quota_specs, entry_until, timetable)
  local quotas = quota_specs == "" and "" or quota_specs .. ","
  return FORMAT_VERSION .. "," .. p[1] .. "," .. p[2] .. "," .. p[3] .. "," .. p[4] .. "," ..
         p[5] .. "," .. p[6] .. "," .. p[7] .. "," .. quotas .. entry_until .. "," .. timetable
end

-- The caller's texts (reserve's, or set_rate's new settings) split, the timetable last: it may
-- hold commas. Whether they are a bucket's settings, then the settings (params_table()), their
-- quotas' text ("" for none), entry's end, timetable and quotas (quota_specs_of()).
local function read_wanted(texts)
  local split = {texts:match(
    "^([^,]*),([^,]*),([^,]*),([^,]*),([^,]*),([^,]*),([^,]*),([^,]*),(.*)$")}
  -- The quotas, if any, before the entry's end: they hold a '/', which no entry's end does.
  local schedule = split[9] or ""
  local quota_specs, entry_until, timetable = schedule:match("^([^,]*/[^,]*),([^,]*),(.*)$")
  if not quota_specs then
    quota_specs = ""
    entry_until, timetable = schedule:match("^([^,]*),(.*)$")
  end
  local wanted = split[1] == FORMAT_VERSION and
                 params_table(split[2], split[3], split[4], split[5], split[6], split[7],
                              split[8])
  local quotas = quota_specs_of(quota_specs)
  return wanted and entry_until and (entry_until == "0" or is_int64_text(entry_until)) and quotas,
         wanted, quota_specs, entry_until, timetable, quotas
end

-- A key of an older layout, read below field by field, brought to the current one in order:
-- one step per layout, each giving a key written before it what it added as a key without
-- it holds it, so that what reads the fields sees the current layout only. `k`: HMGET's reply
-- below (false for a field the key lacks), changed in place. The fields the common call reads
-- too (texts, expires, quota_sums, quota_passed, notation, noticed, backoff) say what their
-- absence means where they are read; a key without texts is no common call's, and is given
-- them by the call that reads it here.
local function upgrade_layout(k)
  -- Before start_full and pay_first: neither.
  k[7], k[8] = k[7] or "0", k[8] or "0"
  -- Before timetables: none, and no entry's end.
  k[9], k[10] = k[9] or "", k[10] or "0"
  -- Before quotas: none.
  k[11] = k[11] or ""
end

-- TokenBucket's methods, for the bucket of the calls that are not the common one (its
-- parameters, state and derived values in a table: with_bucket_methods()).
local bucket_methods = {}

function bucket_methods.same_params(a, b)
  for i = 1, 7 do
    if a[i] ~= b[i] then return false end
  end
  return true
end

-- a < b for int64 texts, exact where tonumber() would round above 2^53.
function bucket_methods.int64_less(a, b)
  if a == b then return false end
  local a_negative, b_negative = a:sub(1, 1) == "-", b:sub(1, 1) == "-"
  if a_negative ~= b_negative then return a_negative end
  -- Between negatives, the larger magnitude is the smaller number.
  if a_negative then a, b = b:sub(2), a:sub(2) end
  if #a ~= #b then return #a < #b end
  return a < b
end

function bucket_methods:rederive()
  local p = self.params
  self.stable, self.max_permits, self.cool_down, self.threshold, self.slope =
    derive(p[1], p.rate, p.burst, p.warmup, p.cold)
end

-- TokenBucket::resync()
function bucket_methods:resync()
  if self.now <= self.next_free then return end
  if self.max_permits > 0 then
    local idle = self.now - self.next_free
    local new_permits = idle / self.cool_down
    self.stored = min(self.max_permits, self.stored + new_permits)
  end
  self.next_free = self.now
end

-- TokenBucket::rescale_stored_permits()
function bucket_methods:rescale(old_max)
  local warming = self.params[1] == "warming_up"
  if old_max == huge then
    if warming then self.stored = 0 else self.stored = self.max_permits end
  elseif old_max == 0 then
    if warming then self.stored = self.max_permits else self.stored = 0 end
  elseif self.stored > 0 then
    self.stored = self.stored * self.max_permits / old_max
  end
end

-- TokenBucket(params, now): empty, or full with start_full.
function bucket_methods:start(new_params)
  self.params, self.stored, self.next_free = new_params, 0, self.now
  self:rederive()
  if new_params.start_full then self.stored = self.max_permits else self:rescale(0) end
end

-- `p` with another rate (the rate's text as the client sent it); nil if it is no rate.
function bucket_methods:with_rate(p, rate)
  return params_table(p[1], rate, p[3], p[4], p[5], p[6], p[7])
end

-- change_params() of bucket_store.cpp: to or from no limit, afresh; else
-- TokenBucket::reconfigure().
function bucket_methods:change_params(new_params)
  local old_rate = self.params.rate
  if (old_rate == huge or new_params.rate == huge) and
      old_rate ~= new_params.rate then
    self:start(new_params)
    return
  end
  self:resync()
  local old_max = self.max_permits
  self.params = new_params
  self:rederive()
  self:rescale(old_max)
end

-- change_rate()
function bucket_methods:change_rate(rate)
  self:change_params(self:with_rate(self.params, rate))
end

local bucket_class = {__index = bucket_methods}

-- `bucket` (the parameters, state and derived values of a bucket) with TokenBucket's methods.
local function with_bucket_methods(bucket) return setmetatable(bucket, bucket_class) end


-- A mark of reserve's booking span (a time after now_s) as integer Unix nanoseconds: whole seconds
-- and nine digits of nanoseconds, which a double could not hold as one number (exact only near the
-- epoch: tests' times). `now_s_text`: TIME's seconds as the server wrote them, or nil; a mark in
-- the current second, the usual one, is written after it, which costs one conversion less.
local function span_mark_text(t, now_s, now_s_text)
  local ns = fmod(t, 1e9)
  if ns < 0 then ns = ns + 1e9 end
  local s = now_s + floor((t - ns) / 1e9 + 0.5)
  -- The int64 maximum, where the core saturates, is 9223372036 s and 854775807 ns.
  if s > 9223372036 or s == 9223372036 and ns > 854775807 then return "9223372036854775807" end
  if s == now_s and now_s_text then return now_s_text .. format("%09d", ns) end
  if s > 0 then return format("%d%09d", s, ns) end
  return integer_string(s * 1e9 + ns)
end

-- reserve_all: several keys decided together, all or nothing (decide_all() of
-- src/stores/multi_key.cpp), with `serve` (below) for each key, on the call's `keys` and `argv`
-- (KEYS and ARGV). KEYS[1..n] the keys (one Cluster slot); ARGV[2] kArgTime as every operation's,
-- one time for the whole call; ARGV[3] kAllArgTimeout as reserve's kArgTimeout (with " quota"),
-- the call's; then for each key the count of its arguments and its reserve or reserve_keeping
-- arguments as it would go alone (from kArgOperation on; their time and timeout are not read).
-- Each key is served twice at most: first asking (its settings applied as reserve applies them,
-- nothing booked: its wait), then, if the call is granted at the latest of the waits, booking as
-- a request made at that moment (with pay_first, the rate's turn moved to it instead), the quotas
-- counting there. Returns {granted 0|1, wait ns (the longest), held_by (the index of the key
-- whose wait it is, 0 when none waited), each key's asking reply, then (granted) each key's
-- booking reply}, each reply as reserve's alone.
local function reserve_all(serve, keys, argv)
  local n, timeout = #keys, argv[3]
  local refuse_quota_wait = sub(timeout, -6) == " quota"
  if refuse_quota_wait then timeout = sub(timeout, 1, -7) end
  timeout = timeout == "9223372036854775807" and 2 ^ 63 or tonumber(timeout)
  local requests, at = {}, 4
  for i = 1, n do
    local count = tonumber(argv[at])
    if not (timeout and count and count >= 5 and count % 1 == 0 and at + count <= #argv) then
      return redis.error_reply("ERR ratelimit: bad arguments")
    end
    requests[i] = {unpack(argv, at + 1, at + count)}
    requests[i][2] = argv[2]
    at = at + 1 + count
  end
  if n < 1 or at ~= #argv + 1 then return redis.error_reply("ERR ratelimit: bad arguments") end
  local call = {asking = true, time = argv[2] == "" and redis.call("TIME") or nil}
  local reply, longest, held_by, refused = {0, "0", 0}, 0, 0, false
  for i = 1, n do
    local asked = serve(requests[i], keys[i], call)
    if type(asked) == "table" and asked.err then return asked end
    local wait_text = type(asked) == "table" and asked[2] or asked
    local wait = tonumber(match(wait_text, "^%d+"))
    local by_quota = find(wait_text, " quota", 1, true) ~= nil
    if wait >= 2 ^ 63 or (refuse_quota_wait and by_quota and wait > 0) then refused = true end
    if wait > longest then longest, held_by = wait, i end
    reply[3 + i] = asked
  end
  reply[2], reply[3] = format("%.0f", longest), held_by
  if refused or longest > max(timeout, 0) then return reply end
  reply[1] = 1
  call.asking, call.hold = false, longest
  for i = 1, n do
    requests[i][4] = "9223372036854775807"
    reply[3 + n + i] = serve(requests[i], keys[i], call)
  end
  return reply
end

-- status, throttle, give_back and the settings step of a reserve that is not the common call,
-- which serve_uncommon() passes what they need of its request.

-- give_back()'s bound on a duration, as saturated_nanoseconds() of bucket_store.cpp.
local CENTURY_NS = 100.0 * 365.25 * 86400e9

-- status: kStatusFields of the bucket in force (describe()), with kStatusBackoff and each
-- quota's kQuotaFields. `quotas`: the key's, as quota_specs_of() reads them, or nil.
local function status(key, bucket, params, timetable, entry_until, backoff, quotas, quota_states,
                      now, now_s)
  local backoff_shown = ""
  if backoff then
    local in_force
    bucket.stored, bucket.next_free, in_force =
      backoff_lib.in_force(backoff, bucket.stored, bucket.next_free, params.rate, now)
    if in_force ~= params.rate then
      bucket.stable, bucket.max_permits, bucket.cool_down, bucket.threshold, bucket.slope =
        derive(params[1], in_force, params.burst, params.warmup, params.cold)
      bucket.stored = min(bucket.stored, bucket.max_permits)
    end
    backoff_shown = format("%.17g", in_force) .. " " ..
                    integer_string(max(backoff.paused_until - now, 0)) .. " " ..
                    format("%.0f", backoff.throttles) .. " " ..
                    format("%.0f", now - backoff.last_throttle)
  end
  bucket:resync()
  local shown = {params[1], params[2], params[3], params[4], params[5], params[6], params[7],
                 format("%.17g", bucket.stored),
                 integer_string(max(bucket.next_free - now, 0)), timetable, entry_until,
                 redis.call("HGET", key, "notation") or "", backoff_shown}
  -- Each quota's limit, period, used now and the wait for one more unit.
  for i = 1, quota_states and #quota_states or 0 do
    local limit, slot, state = quotas[1][i], quotas[3][i], quota_states[i]
    local n = #shown
    shown[n + 1], shown[n + 2] = format("%.0f", limit), quotas[2][i]
    shown[n + 3] = format("%.0f", quota_lib.used(limit, slot, state, now, now_s))
    shown[n + 4] = integer_string(quota_lib.earliest(limit, slot, state, 1, now, now_s) - now)
  end
  return shown
end

-- throttle: record_throttle_report(), the request sent within a century before the report.
-- Returns the back-off, stored permits and next free moment after it, the back-off's text to
-- write and the reply (kThrottleFields).
local function throttle(backoff, stored, next_free, rate, sent_before, retry_after, now, now_s,
                        max_time)
  local new_event, extended
  backoff, stored, next_free, new_event, extended =
    backoff_lib.record(backoff, stored, next_free, rate,
                       now - min(max(sent_before, 0), CENTURY_NS), retry_after, now, now_s,
                       max_time)
  return backoff, stored, next_free, backoff_lib.text(backoff, now_s),
         {new_event and 1 or 0, extended and 1 or 0,
          integer_string(max(backoff.paused_until - now, 0)),
          format("%.17g", backoff_lib.rate_in_force(backoff, rate, now))}
end

-- A mark of a span (reserve's integer Unix nanoseconds) as whole seconds and nanoseconds.
local function mark_parts(text)
  if #text <= 15 then
    local value = tonumber(text)
    local s = floor(value / 1e9)
    return s, value - s * 1e9
  end
  return tonumber(text:sub(1, -10)), tonumber(text:sub(-9))
end

-- give_back: the reply and the next free moment moved back, or only the reply when it stays
-- (0, nil without a bucket, an error for bad arguments).
local function give_back(argv, held, bucket, saved_free_s, saved_free_ns, now, now_s)
  local given_back, from_text, until_text = tonumber(argv[3]), argv[4], argv[5]
  if not (given_back and given_back > 0 and (from_text == nil) == (until_text == nil) and
          (from_text == nil or is_int64_text(from_text) and is_int64_text(until_text))) then
    return redis.error_reply("ERR ratelimit: bad arguments")
  end
  if not held then return nil end
  -- The span's bookings must be the last (why: give_back() of bucket_store.cpp).
  local earliest = -huge
  if from_text then
    local until_s, until_ns = mark_parts(until_text)
    if until_s ~= saved_free_s or until_ns ~= saved_free_ns then return 0 end
    local from_s, from_ns = mark_parts(from_text)
    earliest = (from_s - now_s) * 1e9 + from_ns
  end
  -- give_back(): back by what the permits cost, as if never booked, but not further than the
  -- bucket's fill time before now; durations truncated and at most a century.
  local params, next_free = bucket.params, bucket.next_free
  local cost = whole_ns(min(given_back * bucket.stable, CENTURY_NS))
  local fill = params.warmup
  if params[1] == "bursty" then
    fill = whole_ns(min(params.burst * 1e9, CENTURY_NS))
  end
  local moved_back = max(next_free - cost, now - fill, earliest)
  if moved_back >= next_free then return 0 end
  return 1, moved_back
end

-- decide() before a reserve's booking, when it is not the common call: the caller's quotas,
-- parameters and schedule against the key's (in `bucket`, changed here). `held`: the key holds a
-- bucket (else none, or deleted: nothing saved). Returns whether the caller follows the key's
-- settings and is told so, the key's `noticed` to write (nil: unchanged), the replaced parameters
-- and timetable (nil: none), the key's schedule after it, its new notation (nil: unchanged) and
-- whether the caller's quotas become the key's (take_wanted_quotas()).
local function settle_settings(bucket, held, apply, wanted, wanted_quota_specs, wanted_timetable,
                               wanted_entry_until, quota_specs, timetable, entry_until,
                               saved_noticed, given_notation)
  local followed, tell_followed = false, false
  local noticed, replaced, replaced_timetable, new_notation
  local new_quotas = not held
  -- differs_from_key() of bucket_store.cpp: other parameters (the rate aside under the key's
  -- timetable), another timetable or other quotas.
  if held and not apply then
    local differs = wanted_quota_specs ~= quota_specs or wanted_timetable ~= timetable
    for i = 1, 7 do
      if wanted[i] ~= bucket.params[i] and not (i == 2 and timetable ~= "") then
        differs = true
      end
    end
    if differs then
      followed = true
      local told = joined_texts(wanted, wanted_quota_specs, "0", wanted_timetable)
      if saved_noticed ~= told then tell_followed, noticed = true, told end
    end
  end
  if not held then
    timetable, entry_until = wanted_timetable, wanted_entry_until
    bucket:start(wanted)
  elseif apply and wanted_quota_specs ~= quota_specs then
    replaced, replaced_timetable = bucket.params, timetable
    new_quotas = true
  end
  -- What was replaced is noted once, before the first change (decide()'s replace()).
  if apply and wanted_timetable ~= timetable then
    if not replaced then replaced, replaced_timetable = bucket.params, timetable end
    bucket:change_params(wanted)
    timetable, entry_until = wanted_timetable, wanted_entry_until
  else
    if timetable ~= "" and wanted_timetable == timetable and
        bucket.int64_less(entry_until, wanted_entry_until) then
      entry_until = wanted_entry_until
      bucket:change_rate(wanted[2])
    end
    if apply then
      local applied = wanted
      -- Under a timetable the rate is the latest entry's, settled above.
      local rate = bucket.params[2]
      if timetable ~= "" and wanted[2] ~= rate then applied = bucket:with_rate(wanted, rate) end
      if applied ~= bucket.params and not bucket.same_params(applied, bucket.params) then
        if not replaced then replaced, replaced_timetable = bucket.params, timetable end
        bucket:change_params(applied)
      end
    end
  end
  if (apply and replaced) or not held then new_notation = given_notation or "" end
  -- New settings: the next caller whose own differ is told.
  if replaced and saved_noticed and saved_noticed ~= "" then noticed = "" end
  return followed, tell_followed, noticed, replaced, replaced_timetable, timetable, entry_until,
         new_notation, new_quotas
end

-- The key's bucket read field by field (a key that is not the common call's), after `f`, the
-- first HMGET's reply: `key_found` and `problem` ("" when it holds a bucket that can be used, or
-- when there is no key), its parameters, schedule, derived values, state (free_s, free_ns and
-- expires as read_state() reads them), quotas (quota_specs_of()) and their states, and the
-- fields as read: specs (`quotas`), counts (quota_counts) and passed (quota_passed).
local function read_key(key, f, now_s, now_s_text)
  local k = {problem = ""}
  if f.err then
    k.problem = "a " .. redis.call("TYPE", key)["ok"] .. ", not a bucket"
    return k
  end
  local p = redis.call("HMGET", key, "v", "shape", "rate", "burst", "warmup", "cold",
                       "start_full", "pay_first", "timetable", "entry_until", "quotas",
                       "quota_counts", "quota_passed")
  if p[1] ~= FORMAT_VERSION then
    if not (p[1] == false and redis.call("EXISTS", key) == 0) then
      k.problem = "not a bucket of this version"
    end
    return k
  end
  upgrade_layout(p)
  k.timetable, k.entry_until = p[9], p[10]
  local params = params_table(p[2], p[3], p[4], p[5], p[6], p[7], p[8])
  k.params = params
  if params and (k.entry_until == "0" or is_int64_text(k.entry_until)) then
    k.stable, k.max_permits, k.cool_down, k.threshold, k.slope =
      derive(params[1], params.rate, params.burst, params.warmup, params.cold)
    k.stored, k.free_s, k.free_ns, k.expires = read_state(f, k.max_permits, now_s, now_s_text)
  end
  k.specs, k.counts, k.passed = p[11], p[12], p[13]
  k.quotas = quota_specs_of(k.specs)
  if k.stored and k.quotas and #k.quotas[1] > 0 then
    k.quota_states = quota_lib.states_of(k.counts, #k.quotas[1])
    if k.quota_states then quota_lib.passed_into(k.quota_states, k.passed) else k.stored = nil end
  end
  if k.stored and k.quotas then
    k.key_found = true
  else
    k.problem = "a damaged bucket"
  end
  return k
end


-- reserve's and reserve_keeping's arguments (kArgPermits on, as the header says): true if they are
-- bad, else false and the permits, the timeout (ns), refuse_quota_wait, the caller's texts, the
-- shape, pay_first and rate as texts, the burst or the warm-up and cold factor as texts, the
-- quotas' limits and slot lengths (nil for none) and the notation (nil for none).
local function reserve_arguments(argv)
  -- Mostly one permit, not parsed (tonumber() costs).
  local permits, timeout = argv[3] == "1" and 1 or tonumber(argv[3]), argv[4]
  -- PermitRequest::refuse_quota_wait: refused when a quota holds the request back past now.
  local refuse_quota_wait = false
  if sub(timeout, -6) == " quota" then
    refuse_quota_wait = true
    timeout = sub(timeout, 1, -7)
  end
  -- No timeout, the int64 maximum, as tonumber() would read it.
  if timeout == "9223372036854775807" then timeout = 2 ^ 63 else timeout = tonumber(timeout) end
  local wanted_texts, shape, pay_first, rate = argv[5], argv[6], argv[7], argv[8]
  local burst, warmup, cold
  if shape == "bursty" then burst = argv[9] else warmup, cold = argv[9], argv[10] end
  if not ((burst or cold) and permits and permits > 0 and timeout) then return true end
  -- The quotas' limits and slot lengths, two arguments each, after the shape's; an odd one out
  -- after them is the notation.
  local first = burst and 10 or 11
  local after_shape = #argv - first + 1
  local given_notation
  if after_shape % 2 == 1 then given_notation = argv[#argv] end
  local count = floor(after_shape / 2)
  local quota_limits, quota_slots
  if count > 0 then
    if not (count <= MOST_QUOTAS) then return true end
    quota_limits, quota_slots = {}, {}
    for i = 1, count do
      local limit, slot = tonumber(argv[first + 2 * i - 2]), tonumber(argv[first + 2 * i - 1])
      if not (limit and limit >= 1 and slot and slot >= 1) then return true end
      quota_limits[i], quota_slots[i] = limit, slot
    end
  end
  return false, permits, timeout, refuse_quota_wait, wanted_texts, shape, pay_first, rate, burst,
         warmup, cold, quota_limits, quota_slots, given_notation
end

-- TokenBucket::book(): from `stored` permits and the next free moment `next_free` of a bucket of
-- those derived values (derive()), the stored permits and next free moment after booking
-- `permits` at `book_at`, and the caller's wait from `now`. Its durations and times are not
-- negative here, so the core's saturating sums are sums capped at 2^63; `max_time` caps the next
-- free moment, as in the core.
local function book(stored, next_free, permits, book_at, now, max_time, shape, pay_first, stable,
                    max_permits, cool_down, threshold, slope)
  if book_at > next_free then
    if max_permits > 0 then
      stored = min(max_permits, stored + (book_at - next_free) / cool_down)
    end
    next_free = book_at
  end
  local stored_to_spend = min(permits, stored)
  local fresh_permits = permits - stored_to_spend
  -- TokenBucket::stored_permits_wait_ns()
  local stored_wait = 0
  if shape ~= "bursty" then
    local permits_to_take = stored_to_spend
    local above_threshold = stored - threshold
    if above_threshold > 0 then
      local taken_above = min(above_threshold, permits_to_take)
      local length = (stable + above_threshold * slope) +
                     (stable + (above_threshold - taken_above) * slope)
      stored_wait = whole_ns(taken_above * length / 2.0)
      permits_to_take = permits_to_take - taken_above
    end
    stored_wait = min(stored_wait + whole_ns(stable * permits_to_take), 2 ^ 63)
  end
  -- Adding 0 saturates nothing: skipped.
  local cost = whole_ns(fresh_permits * stable)
  if stored_wait ~= 0 then cost = min(stored_wait + cost, 2 ^ 63) end
  local go_at = next_free
  if cost ~= 0 then next_free = min(next_free + cost, 2 ^ 63) end
  next_free = min(next_free, max_time)
  stored = stored - stored_to_spend
  if pay_first == "1" then go_at = next_free end
  return stored, next_free, max(go_at - now, 0)
end

-- decide() with quotas (QuotaBucket; without, book_request() decides): granted (1) iff the wait
-- is within the timeout, at the later of the rate's moment (`wait` after `now`, as book() gives
-- it, the next free moment booked `booked_free`) and every quota's; a refusal changes nothing.
-- reserve_all: not `grantable` books nothing (asking), and `hold_go` books no sooner. The quotas'
-- `marks` decide alone where the full `states` would decide the same; else the states are read.
-- Returns true if the key's quota counts are damaged, else false, then granted, the wait, whether
-- a quota rather than the rate set it (QuotaBucket::held_by_quota()), the next free moment booked,
-- the quotas' states and marks after it, and the counts, sums and passed counts to write (nil:
-- unchanged).
local function decide_with_quotas(permits, wait, timeout, refuse_quota_wait, grantable, hold_go,
                                  booked_free, stable, max_time, now, now_s, limits, slots, states,
                                  marks, saved_passed)
  local granted, held_by_quota, counts, sums, passed = 0, false, nil, nil, nil
  if marks and (hold_go or not quota_lib.marks_allow(marks, permits, now + wait, limits, slots,
                                                     now_s)) then
    states = quota_lib.states_of(marks.text, #limits)
    -- Marks are read only from a text the script wrote, and the states of that text then too:
    -- only quota_counts and quota_sums_of changed alike by hand fail here.
    if not states then return true end
    quota_lib.passed_into(states, saved_passed)
    marks = nil
  end
  if marks then
    if grantable and wait <= max(timeout, 0) then
      granted = 1
      counts, sums = quota_lib.marks_booked(marks, permits)
    end
  else
    -- QuotaBucket: at the later of the rate's moment and every quota's from there; never for
    -- more than a quota ever allows.
    local rate_go = now + wait
    local go = rate_go
    for i = 1, #limits do
      if permits > limits[i] then
        go = nil
        break
      end
      go = max(go, quota_lib.earliest(limits[i], slots[i], states[i], permits, rate_go, now_s))
    end
    if go then wait = max(go - now, 0) else wait = 2 ^ 63 end
    held_by_quota = not go or go > rate_go
    if go and hold_go and hold_go > go then go, wait = hold_go, hold_go - now end
    if grantable and go and wait <= max(timeout, 0) and
        not (refuse_quota_wait and held_by_quota and wait > 0) then
      granted = 1
      -- The rate's turn goes with the request, unless the rate is no limit, which has none.
      if go > rate_go and stable ~= 0 then
        booked_free = min(booked_free + (go - rate_go), max_time)
      end
      for i = 1, #limits do quota_lib.book(slots[i], states[i], permits, go, now_s, now) end
      counts, sums, passed = quota_lib.counts_text(states)
    end
  end
  return false, granted, wait, held_by_quota, booked_free, states, marks, counts, sums, passed
end

-- What changed since the key was read (everything for a new bucket), in one HSET, and the expiry,
-- for the calls that do more than the common call's usual HSET: `r` holds save()'s and
-- serve_uncommon()'s values of the same names (the key's after the call, and saved_: as read),
-- and the next free moment's seconds and nanoseconds (free_s, free_ns) as they are to be written.
local function write_record(r)
  -- Room for the usual changes made at once: a table grown by each one costs more.
  local changes = {"HSET", r.key, nil, nil, nil, nil, nil, nil}
  local n = 2
  -- Adds its arguments, field-value pairs, to the HSET.
  local function change(...)
    local count = select("#", ...)
    for i = 1, count do changes[n + i] = (select(i, ...)) end
    n = n + count
  end
  local params, timetable, entry_until, quota_specs = r.params, r.timetable, r.entry_until,
                                                       r.quota_specs
  -- The common call keeps the parameters and schedule. A key written afresh holds the fields the
  -- common call reads first: Redis looks a small hash's fields up from its start.
  local params_changed, schedule_changed = false, false
  if not r.common then
    params_changed = params ~= r.saved_params and
                     not (r.saved_params and r.bucket.same_params(params, r.saved_params))
    schedule_changed = timetable ~= (r.saved_timetable or "") or
                       entry_until ~= (r.saved_entry_until or "0")
    if params_changed then change("v", FORMAT_VERSION) end
    local texts = joined_texts(params, quota_specs, entry_until, timetable)
    if texts ~= r.saved_texts then change("texts", texts) end
  end
  if r.stored_changed then change("stored", r.stored_value) end
  if r.free_s_changed then change("free_s", r.free_s) end
  if r.free_ns ~= r.saved_free_ns then change("free_ns", r.free_ns) end
  local counts = r.quota_counts
  if counts and counts ~= (r.saved_quota_counts or "") then
    change("quota_counts", counts, "quota_sums", r.quota_sums, "quota_sums_of", counts)
  end
  if r.quota_passed and r.quota_passed ~= (r.saved_quota_passed or "") then
    change("quota_passed", r.quota_passed)
  end
  if not r.common and quota_specs ~= (r.saved_quota_specs or "") then
    change("quotas", quota_specs)
  end
  if params_changed then
    change("shape", params[1], "rate", params[2], "burst", params[3], "warmup", params[4], "cold",
           params[5], "start_full", params[6], "pay_first", params[7])
  end
  if schedule_changed then change("timetable", timetable, "entry_until", entry_until) end
  if r.new_notation then change("notation", r.new_notation) end
  if r.noticed and r.noticed ~= r.saved_noticed then change("noticed", r.noticed) end
  if r.new_backoff_text then change("backoff", r.new_backoff_text) end
  if n == 2 then return end
  if r.expire_in_ms > MAX_EXPIRY_MS then
    if r.expires ~= 0 then change("expires", 0) end
    redis.call(unpack(changes, 1, n))
    redis.call("PERSIST", r.key)
    return
  end
  if r.move_expiry and r.given_time == "" then change("expires", r.now_ms + r.expire_in_ms) end
  redis.call(unpack(changes, 1, n))
  if r.move_expiry then redis.call("PEXPIRE", r.key, r.expire_in_ms) end
end

-- The settings the caller asks for, off the common call (read_wanted()): set_rate's (kArgNewSettings) or a reserve's (kArgTexts, whose parts that
-- came apart too must be the same). Returns true if they are bad, else false and read_wanted()'s
-- values (the params table, the quotas' specs, the entry's end, the timetable and the quotas;
-- the specs "" when there are none asked for).
local function callers_settings(operation, argv, wanted_texts, shape, pay_first, rate,
                                burst, warmup, cold, quota_limits, quota_slots)
  local read, wanted, specs, entry_until, timetable, quotas
  if operation == "set_rate" and argv[6] then
    read, wanted, specs, entry_until, timetable, quotas = read_wanted(argv[6])
    if not read then return true end
  end
  if operation == "reserve" or operation == "reserve_keeping" then
    read, wanted, specs, entry_until, timetable, quotas = read_wanted(wanted_texts)
    if not (read and shape == wanted[1] and pay_first == wanted[7] and rate == wanted[2] and
            (burst == wanted[3] or warmup == wanted[4] and cold == wanted[5]) and
            #quotas[1] == (quota_limits and #quota_limits or 0)) then
      return true
    end
    for i = 1, #quotas[1] do
      if quotas[1][i] ~= quota_limits[i] or quotas[3][i] ~= quota_slots[i] then return true end
    end
  end
  return false, wanted, specs or "", entry_until, timetable, quotas
end

-- The common call's bucket (the key's texts and rate are the caller's: its parameters are the
-- caller's values) from `f`, the first HMGET's reply: stored, free_s, free_ns and expires as
-- read_state() reads them (stored nil: the key cannot be used, and is read field by field), the
-- quotas' marks, or their states when the sums are not the counts', and the derived values.
local function read_common(f, shape, rate, burst, warmup, cold, quota_limits, now_s, now_s_text)
  local stable, max_permits, cool_down, threshold, slope
  -- Arithmetic reads a number's text once, tonumber() twice.
  if burst then
    stable, max_permits, cool_down, threshold, slope = derive(shape, rate + 0, burst + 0)
  else
    stable, max_permits, cool_down, threshold, slope =
      derive(shape, rate + 0, nil, warmup + 0, cold + 0)
  end
  local stored, free_s, free_ns, expires = read_state(f, max_permits, now_s, now_s_text)
  -- The key's quotas are the caller's (they are in `texts`): their states are read, or only their
  -- marks when the sums are the counts'.
  local marks, states
  if stored and quota_limits then
    if f[7] and f[8] and f[9] == f[7] then marks = quota_lib.marks_of(f[7], f[8], #quota_limits) end
    if not marks then
      states = quota_lib.states_of(f[7], #quota_limits)
      if states then quota_lib.passed_into(states, f[11]) else stored = nil end
    end
  end
  return stored, free_s, free_ns, expires, marks, states, stable, max_permits, cool_down,
         threshold, slope
end

-- replaced_quotas(): the caller's quotas (`wanted_specs` as `quotas` writes them, and
-- `wanted_quotas`, {limits, periods, slots}) become the key's; a new quota keeps the counts of the
-- key's first quota of its period not kept yet (`key_quotas` and their `key_states`, when `held`),
-- others start empty. Returns the key's quotas' text, limits, slot lengths and states after it
-- (nil for none), and their counts, sums and passed counts to write.
local function take_wanted_quotas(wanted_specs, wanted_quotas, held, key_quotas, key_states, now,
                                  now_s)
  local states, taken = {}, {}
  for i = 1, #wanted_quotas[1] do
    for j = 1, held and #key_quotas[1] or 0 do
      if not taken[j] and key_quotas[2][j] == wanted_quotas[2][i] then
        taken[j], states[i] = true, key_states[j]
        break
      end
    end
    states[i] = states[i] or quota_lib.fresh(wanted_quotas[3][i], now, now_s)
  end
  if #states == 0 then return wanted_specs, nil, nil, nil, "", "", "" end
  return wanted_specs, wanted_quotas[1], wanted_quotas[3], states, quota_lib.counts_text(states)
end

-- A call that is not the common one: read_key()'s table of the key read field by field, with the
-- caller's settings (callers_settings(): wanted, wanted_quota_specs, wanted_entry_until,
-- wanted_timetable, wanted_quotas), `held` (the key holds a bucket that can be used), its
-- `next_free` (a time after now_s) and `bucket`, through which the call changes it
-- (with_bucket_methods()); nil if the caller's settings are bad.
local function read_uncommon(operation, argv, key, f, now, now_s, now_s_text, wanted_texts, shape,
                             pay_first, rate, burst, warmup, cold, quota_limits, quota_slots)
  local bad, wanted, wanted_quota_specs, wanted_entry_until, wanted_timetable, wanted_quotas =
    callers_settings(operation, argv, wanted_texts, shape, pay_first, rate, burst, warmup, cold,
                     quota_limits, quota_slots)
  if bad then return nil end
  local k = read_key(key, f, now_s, now_s_text)
  k.wanted, k.wanted_quota_specs, k.wanted_entry_until, k.wanted_timetable, k.wanted_quotas =
    wanted, wanted_quota_specs, wanted_entry_until, wanted_timetable, wanted_quotas
  k.held = k.problem == "" and k.key_found == true
  if k.held then k.next_free = (k.free_s - now_s) * NS_PER_S + k.free_ns end
  k.bucket = with_bucket_methods({now = now, params = k.params, stored = k.stored,
                                  next_free = k.next_free, stable = k.stable,
                                  max_permits = k.max_permits, cool_down = k.cool_down,
                                  threshold = k.threshold, slope = k.slope})
  return k
end

-- set_rate on a key whose `bucket` is read (read_uncommon()): the rate and timetable of
-- ARGV[3..5], or all the settings (ARGV[6], `wanted`: change_settings(); a key without a bucket,
-- or with a damaged one, is made with them). Returns an error reply, or nil and the key's
-- timetable and entry's end after it.
local function set_rate(argv, key, held, problem, bucket, wanted, wanted_timetable,
                        wanted_entry_until)
  if argv[6] then
    if problem ~= "" then redis.call("DEL", key) end
    if held then bucket:change_params(wanted) else bucket:start(wanted) end
    return nil, wanted_timetable, wanted_entry_until
  end
  local new_params = bucket:with_rate(bucket.params, argv[3])
  if not new_params then return redis.error_reply("ERR ratelimit: bad rate") end
  local new_timetable, new_entry_until = argv[4], argv[5]
  if not (type(new_timetable) == "string" and is_int64_text(new_entry_until)) then
    return redis.error_reply("ERR ratelimit: bad arguments")
  end
  bucket:change_params(new_params)
  return nil, new_timetable, new_entry_until
end

-- decide() on bucket_in_force() for a key once throttled (`backoff`): the state a reserve books
-- from (`stored` and `next_free` held) at the rate in force, and the derived values at it (the
-- expiry uses them too: a slower refill keeps the key longer), and the pause left (ns, a text).
-- `params`: the bucket's, or nil on the common call, whose rate and shape are the caller's texts.
local function in_force_state(backoff, stored, next_free, now, shape, params, rate, burst, warmup,
                              cold, stable, max_permits, cool_down, threshold, slope)
  local p = params or {rate = rate + 0, burst = burst and burst + 0,
                       warmup = warmup and warmup + 0, cold = cold and cold + 0}
  local booked_stored, booked_free, in_force =
    backoff_lib.in_force(backoff, stored, next_free, p.rate, now)
  if in_force ~= p.rate then
    stable, max_permits, cool_down, threshold, slope =
      derive(shape, in_force, p.burst, p.warmup, p.cold)
    booked_stored = min(booked_stored, max_permits)
  end
  return booked_stored, booked_free, integer_string(max(backoff.paused_until - now, 0)), stable,
         max_permits, cool_down, threshold, slope
end

-- A reserve's reply of kKeptFields (the header): with the parameters it `replaced` (and
-- `replaced_timetable` and `replaced_quota_specs`), or the key's that the caller `followed`
-- (kReplyFollowedTold when `tell_followed`), or neither.
local function kept_reply(granted, wait_text, problem, params, timetable, quota_specs, replaced,
                          replaced_timetable, replaced_quota_specs, followed, tell_followed)
  if replaced then
    return {granted, wait_text, 1, problem, timetable, params[2], replaced[1], replaced[2],
            replaced[3], replaced[4], replaced[5], replaced[6], replaced[7], replaced_timetable,
            replaced_quota_specs}
  elseif followed then
    return {granted, wait_text, tell_followed and 2 or 3, problem, timetable, params[2],
            params[1], params[2], params[3], params[4], params[5], params[6], params[7], timetable,
            quota_specs}
  end
  return {granted, wait_text, 0, problem, timetable, params[2]}
end

-- A reserve's booking and decision (decide() of bucket_store.cpp) on the bucket held (`stored`,
-- `next_free` and the derived values, at the rate in force when `backoff`), with the quotas'
-- limits, slot lengths and states or marks. Returns an error reply, or nil and granted (0|1), the
-- wait's text (the header's), the reply when the key holds the caller's rate and timetable
-- (kAsRequestedFields), the bucket's stored permits, next free moment, max permits and cool-down
-- after it (the expiry's), the quotas' states and marks, and their counts, sums and passed counts
-- to write (nil: unchanged). `params`: the bucket's, or nil on the common call.
local function book_request(permits, timeout, refuse_quota_wait, call, now, now_s, now_s_text,
                            max_time, stored, next_free, shape, pay_first, stable, max_permits,
                            cool_down, threshold, slope, backoff, params, rate, burst, warmup,
                            cold, quota_limits, quota_slots, quota_states, quota_marks,
                            saved_quota_passed)
  -- The state booked from, and the booking's span from its first mark.
  local booked_stored, booked_free, paused_for = stored, next_free, nil
  if backoff then
    booked_stored, booked_free, paused_for, stable, max_permits, cool_down, threshold, slope =
      in_force_state(backoff, stored, next_free, now, shape, params, rate, burst, warmup, cold,
                     stable, max_permits, cool_down, threshold, slope)
  end
  local booked_from = booked_free
  -- reserve_all's booking (`hold`): as a request made at the call's moment, but with pay_first.
  local book_at = now
  if call and call.hold and pay_first ~= "1" then book_at = now + call.hold end
  local wait
  booked_stored, booked_free, wait =
    book(booked_stored, booked_free, permits, book_at, now, max_time, shape, pay_first, stable,
         max_permits, cool_down, threshold, slope)
  -- reserve_all: `asking` books nothing; `hold` books at least that long after now.
  local grantable, hold_go = not (call and call.asking), call and call.hold and now + call.hold
  local granted, held_by_quota, bad, counts, sums, passed = 0, false
  if quota_marks or quota_states then
    bad, granted, wait, held_by_quota, booked_free, quota_states, quota_marks, counts, sums,
    passed = decide_with_quotas(
      permits, wait, timeout, refuse_quota_wait, grantable, hold_go, booked_free, stable, max_time,
      now, now_s, quota_limits, quota_slots, quota_states, quota_marks, saved_quota_passed)
    if bad then return redis.error_reply("ERR ratelimit: damaged quota counts") end
  elseif grantable and wait <= max(timeout, 0) then
    -- decide() without quotas: granted iff the wait is within the timeout.
    granted = 1
    if hold_go and hold_go > now + wait then
      if stable ~= 0 then booked_free = min(booked_free + (hold_go - now - wait), max_time) end
      wait = hold_go - now
    end
  end
  if granted == 1 then stored, next_free = booked_stored, booked_free end
  local wait_text = integer_string(wait)
  if granted == 1 then
    wait_text = wait_text .. " " .. span_mark_text(booked_from, now_s, now_s_text) .. " " ..
                span_mark_text(next_free, now_s, now_s_text)
  end
  if held_by_quota then wait_text = wait_text .. " quota" end
  if paused_for then wait_text = wait_text .. " backoff " .. paused_for end
  return nil, granted, wait_text, granted == 1 and wait_text or {0, wait_text}, stored, next_free,
         max_permits, cool_down, quota_states, quota_marks, counts, sums, passed
end

-- What changed since the key was read (everything for a new bucket), in one HSET, and the expiry;
-- returns `reply`. The bucket after the call: `stored`, `next_free`, its derived `max_permits`
-- and `cool_down`, its quotas' slot lengths, states or marks and the counts, sums and passed
-- counts to write (nil: unchanged), its back-off, and `noticed` to write (nil: unchanged; the key
-- is kept, KEPT_MS, while it or `saved_noticed` is set). saved_: as the key held them (nil for a
-- new bucket). `record`: on the calls that are not the common one,
-- write_record()'s fields of their own (the parameters, schedule and quotas, and what the key
-- held of them), or nil.
local function save(reply, key, common, given_time, now, now_s, now_ms, stored, next_free,
                    max_permits, cool_down, quota_slots, quota_states, quota_marks, quota_counts,
                    quota_sums, quota_passed, backoff, params, rate, noticed, saved_noticed,
                    saved_stored, saved_free_s, saved_free_ns, saved_expires, saved_quota_counts,
                    saved_quota_passed, record)
  local ns = fmod(next_free, NS_PER_S)
  if ns < 0 then ns = ns + NS_PER_S end
  local s = now_s + floor((next_free - ns) / NS_PER_S + 0.5)
  local stored_changed, free_s_changed = stored ~= saved_stored, s ~= saved_free_s
  -- Nothing changed, so neither did the moment the bucket is full again: the expiry holds. The
  -- common call changes nothing else.
  if common and not (stored_changed or free_s_changed or ns ~= saved_free_ns or quota_counts) then
    return reply
  end
  -- The key is kept this long from now (ms): a key expires this long or up to twice as long
  -- (`margin`) after the bucket would be full again (`full_in_ms`), its quotas' slots have all
  -- passed and its back-off has recovered at its configured rate (`params`'s, or the common
  -- call's `rate` text); a key kept stays KEPT_MS after its last call, its expiry moved once per
  -- KEPT_MARGIN_MS. Full again once the next free moment has passed and the missing permits have
  -- refilled.
  local refill = (max_permits - stored) * cool_down
  if refill ~= refill or max_permits == 0 then refill = 0 end
  local full_in_ms = ceil((max(next_free - now, 0) + refill) / 1e6)
  -- And the quotas are as new once their slots have all passed.
  for i = 1, quota_states and #quota_states or quota_marks and #quota_marks.newest or 0 do
    local newest = quota_marks and quota_marks.newest[i] or quota_states[i][1]
    local passed_us = (newest + QUOTA_COUNTS) * quota_slots[i] - now_s * 1e6 - now / 1000
    full_in_ms = max(full_in_ms, ceil(passed_us / 1000))
  end
  -- And a key backing off keeps its back-off until it has recovered.
  if backoff then
    local configured = params and params.rate or rate + 0
    full_in_ms = max(full_in_ms, ceil((backoff_lib.recovered_at(backoff, configured) - now) / 1e6))
  end
  local margin = EXPIRY_MARGIN_MS
  if noticed or saved_noticed then full_in_ms, margin = max(full_in_ms, KEPT_MS), KEPT_MARGIN_MS end
  local expire_in_ms = full_in_ms + 2 * margin
  local expires = saved_expires or 0
  -- Moved when the noted expiry is too soon, or further than it would be set now (the server's
  -- clock went back, or the rate went up). On a time the caller gives (tests) it is always moved
  -- and not noted: the expiry itself runs on the server's clock.
  local earliest = now_ms + full_in_ms + margin
  local move_expiry = given_time ~= "" or expires < earliest or expires > earliest + margin
  -- Numbers go as they are: Redis writes them with every digit (%.17g), as tonumber() reads them.
  local stored_value = stored == huge and "inf" or stored
  -- The common call mostly moves the next free moment within a second, spending or gaining stored
  -- permits or not, and keeps the expiry: its HSET made without a table, which would cost it more.
  if common and not (free_s_changed or move_expiry or expire_in_ms > MAX_EXPIRY_MS or
                     quota_counts) then
    if stored_changed then
      redis.call("HSET", key, "stored", stored_value, "free_ns", ns)
    else
      redis.call("HSET", key, "free_ns", ns)
    end
    return reply
  end
  local r = record or {}
  r.key, r.common, r.params, r.stored_changed, r.stored_value = key, common, params,
                                                                stored_changed, stored_value
  r.free_s_changed, r.free_s, r.free_ns, r.saved_free_ns = free_s_changed, s, ns, saved_free_ns
  r.quota_counts, r.quota_sums, r.saved_quota_counts = quota_counts, quota_sums, saved_quota_counts
  r.quota_passed, r.saved_quota_passed = quota_passed, saved_quota_passed
  r.noticed, r.saved_noticed = noticed, saved_noticed
  r.expire_in_ms, r.expires, r.move_expiry = expire_in_ms, expires, move_expiry
  r.given_time, r.now_ms = given_time, now_ms
  write_record(r)
  return reply
end

-- A request that is not the common call, after serve() read its arguments (as serve()'s locals of
-- the same names) and the key's first fields (`f`, the first HMGET's reply, its `backoff` and
-- `saved_noticed`): the key read field by field, each operation, and what changed saved.
local function serve_uncommon(argv, key, call, f, backoff, saved_noticed, now, now_s, now_s_text,
                              now_ms, max_time, permits, timeout, refuse_quota_wait, wanted_texts,
                              shape, pay_first, rate, burst, warmup, cold, quota_limits,
                              quota_slots, given_notation, sent_before, retry_after)
  local operation, given_time = argv[1], argv[2]
  local apply = operation == "reserve"
  local k = read_uncommon(operation, argv, key, f, now, now_s, now_s_text, wanted_texts, shape,
                          pay_first, rate, burst, warmup, cold, quota_limits, quota_slots)
  if not k then return redis.error_reply("ERR ratelimit: bad arguments") end
  -- The bucket (changed through `bucket`, its state copied back here) and its schedule; the
  -- key's quotas apart ({limits, periods, slots}, periods in nanoseconds) and their states.
  local bucket, held, problem, params, timetable, entry_until, stored, next_free =
    k.bucket, k.held, k.problem, k.params, k.timetable, k.entry_until, k.stored, k.next_free
  local max_permits, cool_down = k.max_permits, k.cool_down
  local key_quotas, quota_states, quota_marks = k.quotas, k.quota_states, nil
  -- The key's quotas after the call, as `quotas` writes them ("" for none).
  local quota_specs = ""
  -- The record as the key held it (all nil for a new bucket), so that only what changed is
  -- written; what only these calls write goes to write_record() in `record`.
  local record = {bucket = bucket}
  local saved_stored, saved_free_s, saved_free_ns, saved_expires, saved_quota_counts,
        saved_quota_passed
  if held then
    saved_stored, saved_free_s, saved_free_ns, saved_expires = stored, k.free_s, k.free_ns,
                                                               k.expires
    saved_quota_counts, saved_quota_passed = k.counts, k.passed
    record.saved_texts, record.saved_params, record.saved_timetable = f[1], params, timetable
    record.saved_entry_until, record.saved_quota_specs = entry_until, k.specs
    quota_specs, quota_limits, quota_slots = k.specs, key_quotas[1], key_quotas[3]
    if #quota_limits == 0 then quota_limits, quota_slots, quota_states = nil, nil, nil end
  end

  -- Each operation but status changes the bucket and names its reply. `noticed`: the key's to
  -- write (nil: unchanged); new_notation: the key's notation from now on, when reserve changes
  -- it; new_backoff_text: the key's back-off when throttle changed it. The quotas' counts, their
  -- sums and passed counts to write ("" for none), when the call changed them (the passed counts
  -- only when they may have: not when a booking shifted nothing).
  local reply, noticed, new_notation, new_backoff_text
  local quota_counts, quota_sums, quota_passed
  if apply or operation == "reserve_keeping" then
    if problem ~= "" then
      redis.call("DEL", key)
      -- A fresh bucket, never throttled.
      saved_noticed, backoff = nil, nil
    end
    -- decide() before the booking: the request's quotas, parameters and schedule against the
    -- key's; the replaced parameters and timetable, or nil. Whether the caller, which keeps the
    -- key's parameters and asked for other settings, is told that it follows them (the first
    -- such caller since the key's settings changed or another's were told: notice_followed() of
    -- bucket_store.cpp).
    local followed, tell_followed, replaced, replaced_timetable, new_quotas
    followed, tell_followed, noticed, replaced, replaced_timetable, timetable, entry_until,
    new_notation, new_quotas = settle_settings(
      bucket, held, apply, k.wanted, k.wanted_quota_specs, k.wanted_timetable,
      k.wanted_entry_until, quota_specs, timetable, entry_until, saved_noticed, given_notation)
    if new_quotas then
      quota_specs, quota_limits, quota_slots, quota_states, quota_counts, quota_sums,
      quota_passed = take_wanted_quotas(k.wanted_quota_specs, k.wanted_quotas, held, key_quotas,
                                        quota_states, now, now_s)
    end
    params, stored, next_free = bucket.params, bucket.stored, bucket.next_free
    local bad, granted, wait_text, as_requested, counts, sums, passed
    bad, granted, wait_text, as_requested, stored, next_free, max_permits, cool_down,
    quota_states, quota_marks, counts, sums, passed = book_request(
      permits, timeout, refuse_quota_wait, call, now, now_s, now_s_text, max_time, stored,
      next_free, params[1], params[7], bucket.stable, bucket.max_permits, bucket.cool_down,
      bucket.threshold, bucket.slope, backoff, params, rate, burst, warmup, cold, quota_limits,
      quota_slots, quota_states, quota_marks, saved_quota_passed)
    if bad then return bad end
    -- A booking writes the counts it changed; else those that take_wanted_quotas() set stay.
    if counts then quota_counts, quota_sums = counts, sums end
    if passed then quota_passed = passed end
    reply = as_requested
    if replaced or followed or problem ~= "" or timetable ~= k.wanted_timetable or
        params[2] ~= rate then
      reply = kept_reply(granted, wait_text, problem, params, timetable, quota_specs, replaced,
                         replaced_timetable, record.saved_quota_specs, followed, tell_followed)
    end
  elseif operation == "status" then
    if problem ~= "" then return {"unusable", problem} end
    if not held then return nil end
    return status(key, bucket, params, timetable, entry_until, backoff, key_quotas, quota_states,
                  now, now_s)
  elseif operation == "throttle" then
    if not held then return nil end
    backoff, stored, next_free, new_backoff_text, reply =
      throttle(backoff, stored, next_free, params.rate, sent_before, retry_after, now, now_s,
               max_time)
  elseif operation == "set_rate" then
    if not (held or argv[6]) then return nil end
    local failed
    failed, timetable, entry_until = set_rate(argv, key, held, problem, bucket, k.wanted,
                                              k.wanted_timetable, k.wanted_entry_until)
    if failed then return failed end
    if argv[6] then
      -- Deleted when damaged: nothing saved.
      if problem ~= "" then saved_noticed = nil end
      quota_specs, quota_limits, quota_slots, quota_states, quota_counts, quota_sums,
      quota_passed = take_wanted_quotas(k.wanted_quota_specs, k.wanted_quotas, held, key_quotas,
                                        quota_states, now, now_s)
    end
    params, stored, next_free = bucket.params, bucket.stored, bucket.next_free
    max_permits, cool_down = bucket.max_permits, bucket.cool_down
    -- Set by hand: kept (KEPT_MS), and the next caller whose settings differ is told.
    noticed = ""
    reply = 1
  else
    local moved_back
    reply, moved_back = give_back(argv, held, bucket, saved_free_s, saved_free_ns, now, now_s)
    if not moved_back then return reply end
    next_free = moved_back
  end
  record.timetable, record.entry_until, record.quota_specs = timetable, entry_until, quota_specs
  record.new_notation, record.new_backoff_text = new_notation, new_backoff_text
  return save(reply, key, false, given_time, now, now_s, now_ms, stored, next_free, max_permits,
              cool_down, quota_slots, quota_states, quota_marks, quota_counts, quota_sums,
              quota_passed, backoff, params, rate, noticed, saved_noticed, saved_stored,
              saved_free_s, saved_free_ns, saved_expires, saved_quota_counts, saved_quota_passed,
              record)
end

-- One request on `key`, its arguments in `argv` (the call's ARGV, or one request of a batch): its
-- reply. `call`: reserve_all's (its time, and whether it asks or books), or nil. Here the
-- arguments and the key's first fields are read, and the common call served; serve_uncommon()
-- serves the others.
local function serve(argv, key, call)
  local operation, given_time = argv[1], argv[2]
  if operation ~= "reserve" and operation ~= "reserve_keeping" and operation ~= "status" and
      operation ~= "set_rate" and operation ~= "give_back" and operation ~= "throttle" then
    return redis.error_reply("ERR ratelimit: unknown operation " .. tostring(operation))
  end

  -- The request's time: Unix seconds, nanoseconds after them, and TIME's seconds as the server
  -- wrote them (nil on a `given_time`, kArgTime; else TIME, reserve_all's `call` one for all).
  local now_s, now, now_s_text
  if given_time ~= "" then
    local micros = tonumber(given_time)
    now_s = floor(micros / 1e6)
    now = (micros - now_s * 1e6) * 1000
  else
    local time = call and call.time or redis.call("TIME")
    -- Arithmetic reads a number's text once, tonumber() twice (whether it is one, then its value).
    now_s, now, now_s_text = time[1] + 0, time[2] * 1000, time[1]
  end
  local now_ms = now_s * 1000 + floor(now / 1e6)
  -- Times below are nanoseconds after now_s; the int64 maximum since the epoch caps them, as in
  -- the core.
  local max_time = (REP_LIMIT - 1) - now_s * NS_PER_S

  -- reserve's arguments; the parameters' values are read once the key's texts are known, and
  -- checked only when they are not the key's, whose texts were checked before being written.
  local shape, pay_first, rate, burst, warmup, cold
  local permits, timeout, wanted_texts, given_notation
  -- PermitRequest::refuse_quota_wait: refused when a quota holds the request back past now.
  local refuse_quota_wait = false
  -- The quotas that decide with the rate, if any: their limits and slot lengths (microseconds).
  local quota_limits, quota_slots
  if operation == "reserve" or operation == "reserve_keeping" then
    local bad
    bad, permits, timeout, refuse_quota_wait, wanted_texts, shape, pay_first, rate, burst, warmup,
    cold, quota_limits, quota_slots, given_notation = reserve_arguments(argv)
    if bad then return redis.error_reply("ERR ratelimit: bad arguments") end
  end

  -- throttle's report: how long before it the request was sent, and the Retry-After (0: none).
  local sent_before, retry_after
  if operation == "throttle" then
    sent_before, retry_after = tonumber(argv[3]), tonumber(argv[4])
    if not (sent_before and retry_after and retry_after >= 0) then
      return redis.error_reply("ERR ratelimit: bad arguments")
    end
  end

  -- A key whose `texts` and `rate` are the caller's holds the common call's bucket, whose
  -- parameters are the caller's values; other keys (and those written before `texts` was, or
  -- with numbers a bucket cannot hold) are read field by field by the other calls. Keys without
  -- quotas are read as before quotas were. `noticed` last but one: false when the key is not
  -- kept (KEPT_MS).
  local f, noticed_at
  if quota_limits then
    f = redis.pcall("HMGET", key, "texts", "stored", "free_s", "free_ns", "expires", "rate",
                    "quota_counts", "quota_sums", "quota_sums_of", "noticed", "quota_passed",
                    "backoff")
    noticed_at = 10
  else
    f = redis.pcall("HMGET", key, "texts", "stored", "free_s", "free_ns", "expires", "rate",
                    "noticed", "backoff")
    noticed_at = 7
  end
  -- The key's back-off (nil: never throttled).
  local backoff
  if not f.err and f[#f] then backoff = backoff_lib.read(f[#f], now_s) end
  -- The key's `noticed` as read: the texts of the caller last told that it follows the key's
  -- settings ("" for none told since `set --key` or a replacement).
  local saved_noticed = not f.err and f[noticed_at] or nil
  if wanted_texts ~= nil and f[1] == wanted_texts and f[6] == rate then
    -- The bucket as the key holds it (stored, the next free moment's seconds and nanoseconds,
    -- the expiry noted), the quotas' marks or states (each the newest slot, then the
    -- QUOTA_COUNTS counts up to it, oldest first: Quota's state, as cjson reads the key's
    -- quota_counts), and the derived values.
    local saved_stored, saved_free_s, saved_free_ns, saved_expires, quota_marks, quota_states,
          stable, max_permits, cool_down, threshold, slope =
      read_common(f, shape, rate, burst, warmup, cold, quota_limits, now_s, now_s_text)
    if saved_stored then
      local saved_quota_passed
      if quota_limits then saved_quota_passed = f[11] end
      local bad, granted, wait_text, reply, stored, next_free, quota_counts, quota_sums,
            quota_passed
      bad, granted, wait_text, reply, stored, next_free, max_permits, cool_down, quota_states,
      quota_marks, quota_counts, quota_sums, quota_passed = book_request(
        permits, timeout, refuse_quota_wait, call, now, now_s, now_s_text, max_time, saved_stored,
        (saved_free_s - now_s) * NS_PER_S + saved_free_ns, shape, pay_first, stable, max_permits,
        cool_down, threshold, slope, backoff, nil, rate, burst, warmup, cold, quota_limits,
        quota_slots, quota_states, quota_marks, saved_quota_passed)
      if bad then return bad end
      return save(reply, key, true, given_time, now, now_s, now_ms, stored, next_free,
                  max_permits, cool_down, quota_slots, quota_states, quota_marks, quota_counts,
                  quota_sums, quota_passed, backoff, nil, rate, nil, saved_noticed, saved_stored,
                  saved_free_s, saved_free_ns, saved_expires, f[7], saved_quota_passed, nil)
    end
  end
  return serve_uncommon(argv, key, call, f, backoff, saved_noticed, now, now_s, now_s_text, now_ms,
                        max_time, permits, timeout, refuse_quota_wait, wanted_texts, shape,
                        pay_first, rate, burst, warmup, cold, quota_limits, quota_slots,
                        given_notation, sent_before, retry_after)
end

-- The function FCALL calls (registered below): one request, a batch or a reserve_all.
local function bucket(keys, argv)
  if not redis then
    huge, floor, ceil, min, max, fmod, format, sub, find, match, rep, concat, tonumber, tostring,
    type, unpack, select, pcall, setmetatable, cjson, redis = globals_used()
  end
  if argv[1] == "reserve_all" then return reserve_all(serve, keys, argv) end
  if argv[1] ~= "batch" then return serve(argv, keys[1]) end
  -- batch: each request in turn, served as if alone; an error is its request's reply, and the
  -- requests after it go on. All are found first: a batch that is not whole serves none.
  local requests, at = {}, 2
  while at <= #argv do
    local count = tonumber(argv[at])
    if not (count and count >= 1 and count % 1 == 0 and at + count <= #argv) then
      return redis.error_reply("ERR ratelimit: bad batch")
    end
    requests[#requests + 1] = {unpack(argv, at + 1, at + count)}
    at = at + 1 + count
  end
  local replies = {}
  for i = 1, #requests do
    local served, reply = pcall(serve, requests[i], keys[1])
    -- A redis.call() that failed raised its error reply; anything else raised a text.
    if not served and type(reply) ~= "table" then
      reply = redis.error_reply("ERR ratelimit: " .. tostring(reply))
    end
    -- Nil (no bucket) as false, which Redis sends as nil too, and which keeps its place in the
    -- table.
    if reply == nil then reply = false end
    replies[i] = reply
  end
  return replies
end

-- FUNCTION_NAME: set by the lines the build puts before this file (src/CMakeLists.txt), the name
-- with this file's SHA-1, so that each version of ratelimit calls its own.
register(FUNCTION_NAME, bucket)
