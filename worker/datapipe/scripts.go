package datapipe

import "github.com/redis/go-redis/v9"

// luaRecord parses and formats partition records inside every script.
const luaRecord = `
local function parse(r)
  local o, off, st, fin, poff, pst, pfin = string.match(r, '^([^|]*)|(%d+)|(-?%d+)|(%d)|(%d+)|(-?%d+)|(%d)$')
  return {o = o, off = tonumber(off), st = tonumber(st), fin = fin, poff = tonumber(poff), pst = tonumber(pst), pfin = pfin}
end
local function fmt(r)
  return r.o .. '|' .. r.off .. '|' .. r.st .. '|' .. r.fin .. '|' .. r.poff .. '|' .. r.pst .. '|' .. r.pfin
end
`

// luaRequeue (after luaRecord) gives every unfinished partition of the
// hash parts whose owner gives says so back to the queue todo at its
// committed offset, unowned, and returns how many it gave back.
const luaRequeue = `
local function requeue(parts, todo, gives)
  local n = 0
  local all = redis.call('HGETALL', parts)
  for i = 1, #all, 2 do
    local r = parse(all[i + 1])
    if r.fin == '0' and gives(r.o) then
      r.o = ''
      redis.call('HSET', parts, all[i], fmt(r))
      redis.call('LPUSH', todo, all[i])
      n = n + 1
    end
  end
  return n
end
`

// claimScript returns the caller's unfinished partition of the epoch, or
// pops the next one from the queue (creating the queue from the given order
// on the epoch's first claim). Only members of the current generation may
// claim. Returns {partition, offset}; partition -1: the queue is empty, -2:
// the caller's generation is not current.
// KEYS: gennum, todo, parts, init. ARGV: worker, gen, asOf, order...
var claimScript = redis.NewScript(luaRecord + `
if tonumber(redis.call('GET', KEYS[1]) or '0') ~= tonumber(ARGV[2]) then return {-2, 0} end
local all = redis.call('HGETALL', KEYS[3])
for i = 1, #all, 2 do
  local r = parse(all[i + 1])
  if r.o == ARGV[1] and r.fin == '0' then return {tonumber(all[i]), r.off} end
end
if redis.call('EXISTS', KEYS[4]) == 0 then
  for i = 4, #ARGV, 1000 do
    redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
  end
  redis.call('SET', KEYS[4], '1')
end
local p = redis.call('LPOP', KEYS[2])
if not p then return {-1, 0} end
local off = 0
local old = redis.call('HGET', KEYS[3], p)
if old then off = parse(old).off end
local asof = tonumber(ARGV[3])
redis.call('HSET', KEYS[3], p, fmt({o = ARGV[1], off = off, st = asof, fin = '0', poff = off, pst = asof, pfin = '0'}))
return {tonumber(p), off}`)

// commitScript records a worker's offset in its partition as of an applied
// step, plus debug records of applied steps, unless the commit fence says a
// newer generation discarded that step. Returns the current generation
// number (so the worker learns of a new one in the same round trip), -1 when
// fenced, -2 when the worker no longer owns the partition.
// KEYS: parts, commitfence, debug, gennum.
// ARGV: worker, gen, step, part, off, fin, then step/payload pairs.
var commitScript = redis.NewScript(luaRecord + `
local gen, step = tonumber(ARGV[2]), tonumber(ARGV[3])
local fg, fl = -1, 0
local cf = redis.call('GET', KEYS[2])
if cf then
  local a, b = string.match(cf, '^(%d+)|(-?%d+)$')
  fg, fl = tonumber(a), tonumber(b)
end
local function fenced(s) return gen < fg and s > fl end
for i = 7, #ARGV, 2 do
  if not fenced(tonumber(ARGV[i])) then redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1]) end
end
local cur = tonumber(redis.call('GET', KEYS[4]) or '0')
if ARGV[4] == '-1' then return cur end
if fenced(step) then return -1 end
local raw = redis.call('HGET', KEYS[1], ARGV[4])
if not raw then return -2 end
local r = parse(raw)
if r.o ~= ARGV[1] then return -2 end
if step > r.st then
  r.poff, r.pst, r.pfin = r.off, r.st, r.fin
  r.off, r.st, r.fin = tonumber(ARGV[5]), step, ARGV[6]
  redis.call('HSET', KEYS[1], ARGV[4], fmt(r))
end
return cur`)

// releaseScript gives the caller's unfinished partitions back to their
// epochs' queues at their committed offsets (graceful leave).
// KEYS: parts, todo (pairs, one per epoch). ARGV: worker.
var releaseScript = redis.NewScript(luaRecord + luaRequeue + `
local n = 0
for k = 1, #KEYS, 2 do
  n = n + requeue(KEYS[k], KEYS[k + 1], function(o) return o == ARGV[1] end)
end
return n`)

// reconcileScript is run by the root of a new generation before it hands
// its state out. It makes every partition record say what the root's state
// (applied step L) implies: commits after L are rolled back, the root's
// record of step L's consumption is applied where a member died before
// committing it, partitions held by workers outside the generation go back
// to their queue, later commits from older generations are fenced off, and
// debug records after L are dropped. It refuses (-2, nothing written) when a
// newer generation than the caller's exists (a root whose join failed late,
// after the leader had moved on): that generation's members may have applied
// and committed steps after L; a stale reconcile would roll their cursors
// back and drop their debug records while they go on from the cursors they
// hold, so those steps' samples would be used with no record of it.
// KEYS: parts/todo pairs for three epochs, then meta parts, commitfence,
// debug, gennum.
// ARGV: gen, L, members (comma list), debug payload for L (empty for none),
// then worker, part, end, fin per consumption slot.
var reconcileScript = redis.NewScript(luaRecord + luaRequeue + `
if tonumber(redis.call('GET', KEYS[10]) or '0') > tonumber(ARGV[1]) then return -2 end
local L = tonumber(ARGV[2])
local members = {}
for m in string.gmatch(ARGV[3], '[^,]+') do members[m] = true end
for k = 1, 5, 2 do
  local all = redis.call('HGETALL', KEYS[k])
  for i = 1, #all, 2 do
    local r = parse(all[i + 1])
    if r.st > L then
      r.off, r.st, r.fin = r.poff, r.pst, r.pfin
      redis.call('HSET', KEYS[k], all[i], fmt(r))
    end
  end
end
for i = 5, #ARGV, 4 do
  local raw = redis.call('HGET', KEYS[7], ARGV[i + 1])
  if raw then
    local r = parse(raw)
    if r.st < L then
      r.poff, r.pst, r.pfin = r.off, r.st, r.fin
      r.off, r.st, r.fin = tonumber(ARGV[i + 2]), L, ARGV[i + 3]
      redis.call('HSET', KEYS[7], ARGV[i + 1], fmt(r))
    end
  end
end
local returned = 0
for k = 1, 5, 2 do
  returned = returned + requeue(KEYS[k], KEYS[k + 1], function(o) return o ~= '' and not members[o] end)
end
redis.call('SET', KEYS[8], ARGV[1] .. '|' .. ARGV[2])
local steps = redis.call('HKEYS', KEYS[9])
for _, s in ipairs(steps) do
  if tonumber(s) > L then redis.call('HDEL', KEYS[9], s) end
end
if ARGV[4] ~= '' then redis.call('HSET', KEYS[9], ARGV[2], ARGV[4]) end
return returned`)
