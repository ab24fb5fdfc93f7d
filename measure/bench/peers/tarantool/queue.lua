-- dueq's queue in Tarantool 2.6 (memtx), the peer dueq-bench compares against.
--
-- It follows docs/semantics.md where the benchmark exercises it: tasks unique by
-- (queue, key); a ready task is due when time - lead_ms <= now; take hands out due tasks
-- not yet late (now <= time) earliest first, then late ones earliest first, under a
-- lease of ttr ms; ack with a time makes the task ready again at that time with the new
-- payload; a put replaces the task and voids its lease; a lease that runs out makes the
-- task ready again. Left out (the benchmark never uses them): max_attempts, bury/kick,
-- release, done tasks and retention, late_share, release on disconnect.
--
-- One space per queue, "q_<name>": a HASH primary index on key and a non-unique TREE
-- index on (status, time) (memtx appends the key, which breaks ties by key as dueq
-- does). Take needs two index scans: ready tasks from time = now upwards (the first one
-- is the earliest not-late task, if it is due), else the first ready task (the oldest
-- late one, if its time < now).
--
-- Environment: BENCH_LISTEN (127.0.0.1:3301), BENCH_WAL_MODE (write | fsync),
-- BENCH_DIR (data directory, must exist), BENCH_MEMTX_MB (1024).

local fiber = require('fiber')

box.cfg{
    listen = os.getenv('BENCH_LISTEN') or '127.0.0.1:3301',
    wal_mode = os.getenv('BENCH_WAL_MODE') or 'write',
    work_dir = os.getenv('BENCH_DIR') or '.',
    memtx_memory = tonumber(os.getenv('BENCH_MEMTX_MB') or '1024') * 1024 * 1024,
    -- No automatic snapshot in the middle of a measurement; run-all.sh takes one
    -- explicitly where it measures a restart from a snapshot.
    checkpoint_interval = 0,
    -- A larger input buffer per connection lets pipelined requests arrive in batches.
    readahead = 128 * 1024,
    log = 'tarantool.log',
}

local READY, TAKEN = 0, 1
local F_KEY, F_STATUS, F_TIME, F_LEASE, F_LEASE_UNTIL, F_ATTEMPTS, F_VERSION, F_PAYLOAD =
    1, 2, 3, 4, 5, 6, 7, 8

box.once('dueq-bench-v1', function()
    box.schema.space.create('queues', {format = {
        {name = 'name', type = 'string'},
        {name = 'lead_ms', type = 'integer'},
        {name = 'ttr_ms', type = 'integer'},
    }})
    box.space.queues:create_index('primary', {parts = {'name'}})
    -- The benchmark connects as guest on loopback; its calls create spaces and write.
    box.schema.user.grant('guest', 'super', nil, nil, {if_not_exists = true})
end)

-- name -> {space, lead, ttr}
local queues = {}

local function now_ms()
    return tonumber(fiber.time64() / 1000)
end

local function open_queue(name, lead_ms, ttr_ms)
    local space_name = 'q_' .. name
    local s = box.space[space_name]
    if s == nil then
        s = box.schema.space.create(space_name, {format = {
            {name = 'key', type = 'string'},
            {name = 'status', type = 'unsigned'},
            {name = 'time', type = 'integer'},
            {name = 'lease', type = 'unsigned'},
            {name = 'lease_until', type = 'integer'},
            {name = 'attempts', type = 'unsigned'},
            {name = 'version', type = 'unsigned'},
            {name = 'payload', type = 'any'},
        }})
        s:create_index('primary', {type = 'HASH', parts = {'key'}})
        s:create_index('status_time', {type = 'TREE', unique = false,
                                       parts = {'status', 'time'}})
    end
    queues[name] = {space = s, lead = lead_ms, ttr = ttr_ms}
    return queues[name]
end

for _, q in box.space.queues:pairs() do
    open_queue(q[1], q[2], q[3])
end

local function queue_of(name)
    return queues[name] or open_queue(name, 0, 60000)
end

-- Lease ids only grow, across restarts too (they start from the clock in ns).
local next_lease = tonumber(require('clock').realtime64() / 1000)

function dueq_declare(name, lead_ms, ttr_ms)
    box.space.queues:replace{name, lead_ms, ttr_ms}
    open_queue(name, lead_ms, ttr_ms)
    return true
end

function dueq_put(name, key, payload, time)
    local s = queue_of(name).space
    local old = s:get(key)
    local version = old and old[F_VERSION] + 1 or 1
    s:replace{key, READY, time, 0, 0, 0, version, payload}
    return version
end

function dueq_get(name, key)
    local q = queues[name]
    if q == nil then return nil end
    return q.space:get(key)
end

function dueq_take(name, ttr_ms)
    local q = queues[name]
    if q == nil then return nil end
    local idx = q.space.index.status_time
    local now = now_ms()
    -- Not yet late: the earliest ready task with time >= now, if it is due.
    local t = idx:select({READY, now}, {iterator = 'GE', limit = 1})[1]
    if t == nil or t[F_STATUS] ~= READY or t[F_TIME] - q.lead > now then
        -- Late: the earliest ready task, if its time has passed.
        t = idx:select({READY}, {iterator = 'GE', limit = 1})[1]
        if t == nil or t[F_STATUS] ~= READY or t[F_TIME] >= now then return nil end
    end
    next_lease = next_lease + 1
    -- Kept in a local: the update yields (WAL write) and other takes move next_lease on.
    local lease = next_lease
    local ttr = ttr_ms or q.ttr
    t = q.space:update(t[F_KEY], {
        {'=', F_STATUS, TAKEN}, {'=', F_LEASE, lease}, {'=', F_LEASE_UNTIL, now + ttr},
        {'+', F_ATTEMPTS, 1}, {'+', F_VERSION, 1},
    })
    return {t[F_KEY], t[F_PAYLOAD], t[F_TIME], lease, now + ttr, t[F_ATTEMPTS]}
end

function dueq_ack(name, key, lease, payload, time)
    local q = queues[name]
    local t = q and q.space:get(key)
    if t == nil then error('not_found', 0) end
    if t[F_STATUS] ~= TAKEN or t[F_LEASE] ~= lease then error('lease_mismatch', 0) end
    t = q.space:update(key, {
        {'=', F_STATUS, READY}, {'=', F_TIME, time}, {'=', F_PAYLOAD, payload},
        {'=', F_LEASE, 0}, {'=', F_LEASE_UNTIL, 0}, {'=', F_ATTEMPTS, 0}, {'+', F_VERSION, 1},
    })
    return t[F_VERSION]
end

function dueq_ping()
    return true
end

-- memtx tuple bytes and index bytes: the store's own accounting.
function dueq_store_bytes()
    return box.slab.info().items_used + box.info.memory().index
end

function dueq_checkpoint()
    box.snapshot()
    return true
end

-- Leases that ran out make their task ready again (10 times a second).
fiber.create(function()
    fiber.name('lease-expiry')
    while true do
        fiber.sleep(0.1)
        local now = now_ms()
        for _, q in pairs(queues) do
            local expired = {}
            for _, t in q.space.index.status_time:pairs({TAKEN}, {iterator = 'EQ'}) do
                if t[F_LEASE_UNTIL] <= now then table.insert(expired, t[F_KEY]) end
                if #expired >= 1000 then break end
            end
            for _, key in ipairs(expired) do
                local t = q.space:get(key)
                if t ~= nil and t[F_STATUS] == TAKEN and t[F_LEASE_UNTIL] <= now then
                    q.space:update(key, {{'=', F_STATUS, READY}, {'+', F_VERSION, 1}})
                end
            end
        end
    end
end)
