-- One shared bucket decided atomically on the Redis server, with the server's clock (TIME).
--
-- This is src/core/token_bucket.cpp and decide() and change_rate() of
-- src/backends/bucket_backend.cpp, operation for operation and in the same order, so that the same
-- state and times reach the same decisions (tests/redis/ replays the golden vectors through it).
-- Lua numbers are doubles: times are kept as whole seconds plus nanoseconds, and computed in
-- nanoseconds relative to the current second, where every integer below 2^53 (104 days) is exact;
-- an entry's end (Unix seconds, any int64) is kept and compared as decimal text.
--
-- KEYS[1]  ratelimit:{NAME}, a hash: v, shape, rate, burst, warmup, cold, start_full, pay_first
--          (the parameters as the client wrote them; the last two "0" when absent), stored,
--          free_s, free_ns (the next free moment, Unix time), timetable, entry_until (the key's
--          schedule; "" and "0" when absent, as in keys written before timetables), expires (the
--          expiry last set, Unix milliseconds on the server's clock; absent or "0": none noted).
-- ARGV[1]  "reserve", "status", "set_rate" or "give_back"
-- ARGV[2]  the time in Unix microseconds for tests, or "" for the server's TIME
-- reserve: ARGV[3..7] shape ("bursty" or "warming_up"), permits per second, max burst seconds,
--          warm-up nanoseconds, cold factor; ARGV[8] permits; ARGV[9] timeout nanoseconds;
--          ARGV[10] "1" to apply these parameters to a bucket kept with others, "0" to keep its;
--          ARGV[11], ARGV[12] start full, pay first ("0" or "1"); ARGV[13], ARGV[14] the timetable
--          the rate comes from and its entry's end (decimal Unix seconds). ARGV[11..14] may be
--          left off (as scripts/bench_redis.sh does): "0", "0", "", "0".
--          Returns {granted 0|1, wait ns, parameters replaced 0|1, why the record was discarded,
--          the key's timetable and rate after the call}, followed when replaced by the replaced
--          parameters (as status gives them) and the replaced timetable.
-- status:  returns nil without a bucket, {"unusable", why} for a record that cannot be used,
--          else {shape, rate, burst, warmup, cold, start_full, pay_first, stored permits now, ns
--          until the next free, timetable, entry_until}.
-- set_rate: ARGV[3] the new rate, ARGV[4], ARGV[5] the new timetable and entry's end; returns nil
--          without a bucket, else 1.
-- give_back: ARGV[3] permits booked and not used (give_back() of bucket_backend.cpp); returns nil
--          without a bucket, else 1.
-- Waits are strings of integer nanoseconds: a Lua number in a reply is truncated to an integer.

local NS_PER_S = 1e9
-- give_back()'s bound on a duration, as saturated_nanoseconds() of bucket_backend.cpp.
local CENTURY_NS = 100.0 * 365.25 * 86400e9
local REP_LIMIT = 9223372036854775808 -- 2^63; stands for the saturated int64 maximum as well
local FORMAT_VERSION = "1"
-- A key expires this long or up to twice as long after the bucket would be full again: an idle
-- key vanishes. The expiry is set a margin further than it must be, and noted in the hash
-- (expires, Unix milliseconds), so that a busy key's expiry is moved about once per margin, not
-- on every call.
local EXPIRY_MARGIN_MS = 1000
-- Beyond this (about 3000 years) a key is kept without expiry.
local MAX_EXPIRY_MS = 1e14
-- The latest next free moment, in Unix seconds: the int64 maximum of nanoseconds.
local MAX_FREE_S = 9223372037

local operation = ARGV[1]
local key = KEYS[1]

local now_s, now
if ARGV[2] ~= "" then
  local micros = tonumber(ARGV[2])
  now_s = math.floor(micros / 1e6)
  now = (micros - now_s * 1e6) * 1000
else
  local time = redis.call("TIME")
  now_s = tonumber(time[1])
  now = tonumber(time[2]) * 1000
end
local now_ms = now_s * 1000 + math.floor(now / 1e6)
-- Times below are nanoseconds after now_s; the int64 maximum since the epoch caps them, as in
-- the core.
local max_time = (REP_LIMIT - 1) - now_s * NS_PER_S

-- As Java's (long) cast: toward zero, saturating, NaN as 0.
local function truncate_saturated(value)
  if value ~= value then return 0 end
  if value >= REP_LIMIT then return REP_LIMIT end
  if value < -REP_LIMIT then return -REP_LIMIT end
  if value >= 0 then return math.floor(value) end
  return math.ceil(value)
end

local function add_saturated(a, b)
  return math.max(math.min(a + b, REP_LIMIT), -REP_LIMIT)
end

local function integer_string(value)
  if value == 0 then return "0" end
  if value >= REP_LIMIT then return "9223372036854775807" end
  return string.format("%.0f", value)
end

-- Neither NaN nor infinite.
local function finite(value)
  return value ~= nil and value > -math.huge and value < math.huge
end

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

-- a < b for int64 texts, exact where tonumber() would round above 2^53.
local function int64_less(a, b)
  if a == b then return false end
  local a_negative, b_negative = a:sub(1, 1) == "-", b:sub(1, 1) == "-"
  if a_negative ~= b_negative then return a_negative end
  -- Between negatives, the larger magnitude is the smaller number.
  if a_negative then a, b = b:sub(2), a:sub(2) end
  if #a ~= #b then return #a < #b end
  return a < b
end

-- Parameters: the strings as the client sent them, and their values.
local PARAM_NAMES = {"shape", "rate", "burst", "warmup", "cold", "start_full", "pay_first"}

local function read_params(shape, rate, burst, warmup, cold, start_full, pay_first)
  start_full = start_full or "0"
  pay_first = pay_first or "0"
  if (start_full ~= "0" and start_full ~= "1") or (pay_first ~= "0" and pay_first ~= "1") then
    return nil
  end
  local params = {
    text = {shape = shape, rate = rate, burst = burst, warmup = warmup, cold = cold,
            start_full = start_full, pay_first = pay_first},
    start_full = start_full == "1",
    pay_first = pay_first == "1",
    shape = shape,
    rate = tonumber(rate),
    burst = tonumber(burst),
    warmup = tonumber(warmup),
    cold = tonumber(cold),
  }
  if shape ~= "bursty" and shape ~= "warming_up" then return nil end
  -- Only the rate may be infinite (no limit); NaN fails every comparison.
  if not (params.rate and params.rate > 0 and finite(params.burst) and finite(params.warmup) and
          finite(params.cold)) then
    return nil
  end
  if shape == "bursty" and not (params.burst >= 0) then return nil end
  if shape == "warming_up" and (params.start_full or not (params.warmup >= 0 and params.cold >= 1)) then
    return nil
  end
  return params
end

local function same_params(a, b)
  for _, name in ipairs(PARAM_NAMES) do
    if a.text[name] ~= b.text[name] then return false end
  end
  return true
end

-- TokenBucket::derive()
local function derive(bucket)
  local p = bucket.params
  local rate = p.rate
  bucket.stable = NS_PER_S / rate
  bucket.threshold = 0
  bucket.slope = 0
  if p.shape == "bursty" then
    if p.burst == 0 then bucket.max = 0 else bucket.max = p.burst * rate end
    bucket.cool_down = bucket.stable
    return
  end
  local warmup_ns = p.warmup
  if warmup_ns == 0 then
    bucket.max = 0
    bucket.cool_down = bucket.stable
    return
  end
  if bucket.stable == 0 then
    bucket.threshold = math.huge
    bucket.max = math.huge
    bucket.cool_down = 0
    return
  end
  local cold_interval = bucket.stable * p.cold
  bucket.threshold = 0.5 * warmup_ns / bucket.stable
  bucket.max = bucket.threshold + 2.0 * warmup_ns / (bucket.stable + cold_interval)
  local warmup_permits = bucket.max - bucket.threshold
  if warmup_permits > 0 and warmup_permits < math.huge then
    bucket.slope = (cold_interval - bucket.stable) / warmup_permits
  end
  bucket.cool_down = warmup_ns / bucket.max
end

-- TokenBucket::resync()
local function resync(bucket)
  if now <= bucket.next_free then return end
  if bucket.max > 0 then
    local idle = now - bucket.next_free
    local new_permits = idle / bucket.cool_down
    bucket.stored = math.min(bucket.max, bucket.stored + new_permits)
  end
  bucket.next_free = now
end

-- TokenBucket::rescale_stored_permits()
local function rescale(bucket, old_max)
  local warming = bucket.params.shape == "warming_up"
  if old_max == math.huge then
    if warming then bucket.stored = 0 else bucket.stored = bucket.max end
  elseif old_max == 0 then
    if warming then bucket.stored = bucket.max else bucket.stored = 0 end
  elseif bucket.stored > 0 then
    bucket.stored = bucket.stored * bucket.max / old_max
  end
end

-- TokenBucket::stored_permits_wait_ns()
local function stored_permits_wait(bucket, stored, permits_to_take)
  if bucket.params.shape == "bursty" then return 0 end
  local wait = 0
  local above_threshold = stored - bucket.threshold
  if above_threshold > 0 then
    local taken_above = math.min(above_threshold, permits_to_take)
    local length = (bucket.stable + above_threshold * bucket.slope) +
                   (bucket.stable + (above_threshold - taken_above) * bucket.slope)
    wait = truncate_saturated(taken_above * length / 2.0)
    permits_to_take = permits_to_take - taken_above
  end
  return add_saturated(wait, truncate_saturated(bucket.stable * permits_to_take))
end

-- TokenBucket::book(): the state after booking `permits` now, and the caller's wait; the bucket
-- itself is not changed.
local function book(bucket, permits)
  local stored, next_free = bucket.stored, bucket.next_free
  if now > next_free then
    if bucket.max > 0 then
      stored = math.min(bucket.max, stored + (now - next_free) / bucket.cool_down)
    end
    next_free = now
  end
  local stored_to_spend = math.min(permits, stored)
  local fresh_permits = permits - stored_to_spend
  local cost = add_saturated(stored_permits_wait(bucket, stored, stored_to_spend),
                             truncate_saturated(fresh_permits * bucket.stable))
  local previous_paid_at = next_free
  next_free = math.min(add_saturated(next_free, cost), max_time)
  stored = stored - stored_to_spend
  local go_at = previous_paid_at
  if bucket.params.pay_first then go_at = next_free end
  return stored, next_free, math.max(go_at - now, 0)
end

-- TokenBucket::reconfigure()
local function reconfigure(bucket, params)
  resync(bucket)
  local old_max = bucket.max
  bucket.params = params
  derive(bucket)
  rescale(bucket, old_max)
end

-- TokenBucket(params, now), in the table `bucket`: empty, or full with start_full.
local function start(bucket, params)
  bucket.params, bucket.stored, bucket.next_free = params, 0, now
  derive(bucket)
  if params.start_full then bucket.stored = bucket.max else rescale(bucket, 0) end
end

-- `params` with another rate (the rate's text as the client sent it); nil if it is no rate.
local function with_rate(params, rate)
  local text = params.text
  return read_params(text.shape, rate, text.burst, text.warmup, text.cold, text.start_full,
                     text.pay_first)
end

-- change_params() of bucket_backend.cpp: to or from no limit, afresh.
local function change_params(bucket, params)
  local old_rate = bucket.params.rate
  if (old_rate == math.huge or params.rate == math.huge) and old_rate ~= params.rate then
    start(bucket, params)
  else
    reconfigure(bucket, params)
  end
end

-- change_rate()
local function change_rate(bucket, rate)
  change_params(bucket, with_rate(bucket.params, rate))
end

-- The bucket the key holds, with its schedule; nil and why if there is none that can be used.
-- `params` (optional) are the caller's: kept when the key holds the same text, parsed only when
-- it holds others. Every number must be what a bucket can hold, else the key is damaged (NaN or
-- infinite permits or times would keep the key from expiring or refuse every call).
local function load(params)
  local f = redis.pcall("HMGET", key, "v", "shape", "rate", "burst", "warmup", "cold",
                        "start_full", "pay_first", "stored", "free_s", "free_ns", "timetable",
                        "entry_until", "expires")
  if f.err then return nil, "a " .. redis.call("TYPE", key)["ok"] .. ", not a bucket" end
  if f[1] ~= FORMAT_VERSION then
    if f[1] == false and redis.call("EXISTS", key) == 0 then return nil, "" end
    return nil, "not a bucket of this version"
  end
  local start_full, pay_first = f[7] or "0", f[8] or "0"
  local text = params and params.text
  if not (text and text.shape == f[2] and text.rate == f[3] and text.burst == f[4] and
          text.warmup == f[5] and text.cold == f[6] and text.start_full == start_full and
          text.pay_first == pay_first) then
    params = read_params(f[2], f[3], f[4], f[5], f[6], start_full, pay_first)
  end
  local stored, free_s, free_ns = tonumber(f[9]), tonumber(f[10]), tonumber(f[11])
  local timetable, entry_until = f[12] or "", f[13] or "0"
  -- 0: none noted (keys written before expiries were), or kept without expiry.
  local expires = tonumber(f[14] or "0")
  if not (params and stored and stored >= 0 and finite(free_s) and free_s >= 0 and
          finite(expires) and expires >= 0 and
          free_s <= MAX_FREE_S and free_s == math.floor(free_s) and free_ns and free_ns >= 0 and
          free_ns < NS_PER_S and free_ns == math.floor(free_ns) and is_int64_text(entry_until)) then
    return nil, "a damaged bucket"
  end
  local bucket = {params = params, stored = stored,
                  next_free = (free_s - now_s) * NS_PER_S + free_ns,
                  schedule = {timetable = timetable, entry_until = entry_until},
                  saved = {params = params, stored = stored, free_s = free_s, free_ns = free_ns,
                           timetable = timetable, entry_until = entry_until, expires = expires}}
  derive(bucket)
  -- Never more than the bucket holds (infinite only where it holds that much); a rescale may
  -- round a full bucket a little above.
  if not (stored <= bucket.max * (1 + 1e-9)) then return nil, "a damaged bucket" end
  return bucket, ""
end

-- Writes what changed since load() (everything for a new bucket) in one HSET, and the expiry.
local function save(bucket)
  local t = bucket.next_free
  local ns = math.fmod(t, NS_PER_S)
  if ns < 0 then ns = ns + NS_PER_S end
  local s = now_s + math.floor((t - ns) / NS_PER_S + 0.5)
  local saved = bucket.saved or {}
  local changes = {"HSET", key}
  local text = bucket.params.text
  if bucket.params ~= saved.params and
      not (saved.params and same_params(bucket.params, saved.params)) then
    for _, name in ipairs(PARAM_NAMES) do
      changes[#changes + 1] = name
      changes[#changes + 1] = text[name]
    end
    changes[#changes + 1] = "v"
    changes[#changes + 1] = FORMAT_VERSION
  end
  -- Numbers go as they are: Redis writes them with every digit (%.17g), as tonumber() reads them.
  if bucket.stored ~= saved.stored then
    changes[#changes + 1] = "stored"
    changes[#changes + 1] = bucket.stored == math.huge and "inf" or bucket.stored
  end
  if s ~= saved.free_s then
    changes[#changes + 1] = "free_s"
    changes[#changes + 1] = s
  end
  if ns ~= saved.free_ns then
    changes[#changes + 1] = "free_ns"
    changes[#changes + 1] = ns
  end
  local schedule = bucket.schedule
  if schedule.timetable ~= (saved.timetable or "") or
      schedule.entry_until ~= (saved.entry_until or "0") then
    changes[#changes + 1] = "timetable"
    changes[#changes + 1] = schedule.timetable
    changes[#changes + 1] = "entry_until"
    changes[#changes + 1] = schedule.entry_until
  end
  -- Nothing changed, so neither did the moment the bucket is full again: the expiry holds.
  if #changes == 2 then return end
  -- Full again once the next free moment has passed and the missing permits have refilled.
  local refill = (bucket.max - bucket.stored) * bucket.cool_down
  if refill ~= refill or bucket.max == 0 then refill = 0 end
  local full_in_ms = math.ceil((math.max(bucket.next_free - now, 0) + refill) / 1e6)
  local expire_in_ms = full_in_ms + 2 * EXPIRY_MARGIN_MS
  local expires = saved.expires or 0
  if expire_in_ms > MAX_EXPIRY_MS then
    if expires ~= 0 then
      changes[#changes + 1] = "expires"
      changes[#changes + 1] = 0
    end
    redis.call(unpack(changes))
    redis.call("PERSIST", key)
    return
  end
  -- Moved when the noted expiry is too soon, or further than it would be set now (the server's
  -- clock went back, or the rate went up). On a time the caller gives (tests) it is always moved
  -- and not noted: the expiry itself runs on the server's clock.
  local earliest = now_ms + full_in_ms + EXPIRY_MARGIN_MS
  local move_expiry = ARGV[2] ~= "" or expires < earliest or expires > earliest + EXPIRY_MARGIN_MS
  if move_expiry and ARGV[2] == "" then
    changes[#changes + 1] = "expires"
    changes[#changes + 1] = now_ms + expire_in_ms
  end
  redis.call(unpack(changes))
  if move_expiry then redis.call("PEXPIRE", key, expire_in_ms) end
end

-- decide()'s replace(): the bucket's parameters and timetable before, for the reply.
local function replace(bucket, params)
  local replaced_params, replaced_timetable = bucket.params.text, bucket.schedule.timetable
  change_params(bucket, params)
  return replaced_params, replaced_timetable
end

-- decide() before the booking: the request's parameters and schedule against the key's. Returns
-- the replaced parameters' text and timetable, or nil.
local function settle_params(bucket, params, schedule, apply)
  if apply and schedule.timetable ~= bucket.schedule.timetable then
    local replaced_params, replaced_timetable = replace(bucket, params)
    bucket.schedule = schedule
    return replaced_params, replaced_timetable
  end
  local kept = bucket.schedule
  if kept.timetable ~= "" and schedule.timetable == kept.timetable and
      int64_less(kept.entry_until, schedule.entry_until) then
    kept.entry_until = schedule.entry_until
    change_rate(bucket, params.text.rate)
  end
  if apply then
    local wanted = params
    -- Under a timetable the rate is the latest entry's, settled above.
    local rate = bucket.params.text.rate
    if kept.timetable ~= "" and params.text.rate ~= rate then wanted = with_rate(params, rate) end
    if wanted ~= bucket.params and not same_params(wanted, bucket.params) then
      return replace(bucket, wanted)
    end
  end
  return nil
end

if redis.replicate_commands then redis.replicate_commands() end

if operation == "reserve" then
  local params = read_params(ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[11], ARGV[12])
  local permits, timeout, apply = tonumber(ARGV[8]), tonumber(ARGV[9]), ARGV[10] == "1"
  local schedule = {timetable = ARGV[13] or "", entry_until = ARGV[14] or "0"}
  if not (params and permits and permits > 0 and timeout and
          is_int64_text(schedule.entry_until)) then
    return redis.error_reply("ERR ratelimit: bad arguments")
  end
  local bucket, problem = load(params)
  if problem ~= "" then redis.call("DEL", key) end
  if bucket == nil then
    -- No key, or deleted above: nothing saved.
    bucket = {schedule = schedule}
    start(bucket, params)
  end
  local replaced, replaced_timetable = settle_params(bucket, params, schedule, apply)
  -- decide(): granted iff the wait is within the timeout; a refusal changes nothing.
  local stored, next_free, wait = book(bucket, permits)
  local granted = 0
  if wait <= math.max(timeout, 0) then
    granted = 1
    bucket.stored, bucket.next_free = stored, next_free
  end
  save(bucket)
  if replaced then
    return {granted, integer_string(wait), 1, problem, bucket.schedule.timetable,
            bucket.params.text.rate, replaced.shape,
            replaced.rate, replaced.burst, replaced.warmup, replaced.cold, replaced.start_full,
            replaced.pay_first, replaced_timetable}
  end
  return {granted, integer_string(wait), 0, problem, bucket.schedule.timetable,
          bucket.params.text.rate}
end

if operation == "status" then
  local bucket, problem = load()
  if problem ~= "" then return {"unusable", problem} end
  if bucket == nil then return nil end
  resync(bucket)
  local text = bucket.params.text
  return {text.shape, text.rate, text.burst, text.warmup, text.cold, text.start_full,
          text.pay_first, string.format("%.17g", bucket.stored),
          integer_string(math.max(bucket.next_free - now, 0)), bucket.schedule.timetable,
          bucket.schedule.entry_until}
end

if operation == "set_rate" then
  local bucket = load()
  if bucket == nil then return nil end
  local params = with_rate(bucket.params, ARGV[3])
  if not params then return redis.error_reply("ERR ratelimit: bad rate") end
  local schedule = {timetable = ARGV[4], entry_until = ARGV[5]}
  if not (type(schedule.timetable) == "string" and is_int64_text(schedule.entry_until)) then
    return redis.error_reply("ERR ratelimit: bad arguments")
  end
  change_params(bucket, params)
  bucket.schedule = schedule
  save(bucket)
  return 1
end

if operation == "give_back" then
  local permits = tonumber(ARGV[3])
  if not (permits and permits > 0) then return redis.error_reply("ERR ratelimit: bad arguments") end
  local bucket = load()
  if bucket == nil then return nil end
  -- give_back(): back by what the permits cost, as if never booked, but not further than the
  -- bucket's fill time before now; durations truncated and at most a century.
  local p = bucket.params
  local cost = truncate_saturated(math.min(permits * bucket.stable, CENTURY_NS))
  local fill = p.warmup
  if p.shape == "bursty" then fill = truncate_saturated(math.min(p.burst * NS_PER_S, CENTURY_NS)) end
  local moved_back = math.max(bucket.next_free - cost, now - fill)
  if moved_back < bucket.next_free then
    bucket.next_free = moved_back
    save(bucket)
  end
  return 1
end

return redis.error_reply("ERR ratelimit: unknown operation " .. tostring(operation))
