-- Token buckets for HAProxy, the same as policies.rate_limit.TokenBucket: a full bucket
-- of `capacity` tokens that refills at `rate` per second; a request takes one token.
-- The front door takes first, the app later, so the app's bucket has refilled at least
-- as much: whatever is forwarded, the app admits too.
--
--   http-request lua.take <kind> <rate> <capacity>
-- reads the key from txn.<kind>_key; a refusal sets txn.retry_after (whole seconds).

local buckets = {}  -- kind -> key -> {tokens, updated}
local counts = {}   -- kind -> number of keys
local max_keys = tonumber(os.getenv("TICKETSERVE_FRONT_MAX_KEYS") or "100000")

local function now_s()
    local t = core.now()
    return t.sec + t.usec / 1e6
end

core.register_action("take", { "http-req" }, function(txn, kind, rate, capacity)
    local key = txn:get_var("txn." .. kind .. "_key")
    if key == nil then
        return
    end
    rate, capacity = tonumber(rate), tonumber(capacity)
    local now = now_s()
    local table_ = buckets[kind]
    if table_ == nil then
        table_ = {}
        buckets[kind], counts[kind] = table_, 0
    end
    local b = table_[key]
    if b == nil then
        if counts[kind] >= max_keys then
            -- Forgetting every bucket is what the app does to its least recent: a
            -- forgotten key starts full again, so this only ever errs towards admitting.
            table_ = {}
            buckets[kind], counts[kind] = table_, 0
        end
        b = { tokens = capacity, updated = now }
        table_[key] = b
        counts[kind] = counts[kind] + 1
    end
    b.tokens = math.min(capacity, b.tokens + (now - b.updated) * rate)
    b.updated = now
    if b.tokens >= 1 then
        b.tokens = b.tokens - 1
    else
        txn:set_var("txn.retry_after", math.max(1, math.ceil((1 - b.tokens) / rate)))
    end
end, 3)
