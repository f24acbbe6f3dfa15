// What the core's Redis scripts cost against the floor, piece by piece, on
// one server or on one master of a cluster (its replica attached).
//
//   node bench/redis-scripts.mjs [PORT] [ROUNDS]    # default 6379, 40 rounds
//
// Each case is one intent, two round trips, timed end to end from ioredis:
// - floor: `SET NX`, then `SET XX` (no script, no index, no fence);
// - minimal: a Lua claim (`SET NX`, one `ZADD` into the in-flight index) and a
//   Lua completion fenced on the owner token (`GET`, compare, `SET`, `ZREM`,
//   one `ZADD`): the least an atomic, indexed, fenced pair can do;
// - the core's `claim` and `complete` scripts as they are
//   (crates/intentkey/schema/redis), then each with one piece taken out:
//   the argument checks, the change publication (waiters' wake-up), the TTL
//   (`TIME`, `PEXPIREAT`), the `done` index, the claim's clean-up of an
//   expired record's index members.
// The ablations are measures only: every piece is part of the layout.
// Every case runs a block of 100 intents per round, the cases interleaved,
// and the figure is the median of the rounds. Keys are under one hash tag
// of the run's own, deleted at the end.
import fs from 'node:fs';
import Redis from 'ioredis';

const port = Number(process.argv[2] ?? 6379);
const rounds = Number(process.argv[3] ?? 40);
const block = 100;
const dir = new URL('../../crates/intentkey/schema/redis/', import.meta.url);
const read = (name) => fs.readFileSync(new URL(name, dir), 'utf8');
const prelude = read('prelude.lua');
const claim = read('claim.lua');
const complete = read('complete.lua');

/** `text` with `from` replaced by `to`; fails when the script no longer holds `from`. */
function without(text, from, to = '') {
  if (!text.includes(from)) throw new Error(`redis-scripts: the script no longer holds ${JSON.stringify(from)}; update the ablation`);
  return text.replace(from, to);
}

const plainHeader =
  "local function header(status, token, created, lookups, nxt, expires) return 'ik1 ' .. status .. ' ' .. token .. ' ' .. created .. ' ' .. lookups .. ' ' .. nxt .. ' ' .. expires .. '\\n' end\n";
const settleDone = "settle(ARGV[1], 'done', r.created, ARGV[3])";
const variants = {
  'the core\u2019s scripts': [claim, complete],
  'without the argument checks': [plainHeader + claim, plainHeader + complete],
  'without the change publication': [claim, without(complete, 'changed(ARGV[1])')],
  'without the TTL (TIME, PEXPIREAT)': [
    claim,
    without(complete, settleDone, "redis.call('ZADD', KEYS[3], r.created, ARGV[1]) redis.call('ZADD', KEYS[5], ARGV[3], ARGV[1])"),
  ],
  'without the done index': [
    claim,
    without(complete, settleDone, "redis.call('ZADD', KEYS[5], ARGV[3], ARGV[1]) redis.call('TIME') redis.call('PEXPIREAT', KEYS[1], ARGV[3] .. '000')"),
  ],
  'without the claim\u2019s clean-up': [without(claim, "redis.call('ZREM', KEYS[3], ARGV[1])\nredis.call('ZREM', KEYS[5], ARGV[1])"), complete],
};
const minimal = [
  "if not redis.call('SET', KEYS[1], ARGV[1], 'NX') then return redis.call('GET', KEYS[1]) end redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2]) return 1",
  "local v = redis.call('GET', KEYS[1]) if not v or string.sub(v, 1, 40) ~= ARGV[3] then return 0 end redis.call('SET', KEYS[1], ARGV[1]) redis.call('ZREM', KEYS[2], ARGV[2]) redis.call('ZADD', KEYS[3], ARGV[4], ARGV[2]) return 1",
];

const redis = new Redis({ port, lazyConnect: true, maxRetriesPerRequest: 0 });
await redis.connect();
const cluster = /cluster_enabled:1/.test(await redis.info('cluster'));
/** A hash tag of the run's own; on a cluster, one whose slot this master serves. */
async function ownTag() {
  if (!cluster) return `{ik-ladder-${process.pid}}`;
  const ranges = (await redis.cluster('SLOTS')).filter(([, , master]) => Number(master[1]) === port).map(([from, to]) => [from, to]);
  for (let n = 0; ; n++) {
    const name = `ik-ladder-${process.pid}-${n}`;
    const slot = await redis.cluster('KEYSLOT', name);
    if (ranges.some(([from, to]) => slot >= from && slot <= to)) return `{${name}}`;
  }
}
const tag = await ownTag();
const load = (source) => redis.script('LOAD', source);
const sha = {};
for (const [name, [c, f]] of Object.entries(variants)) sha[name] = [await load(prelude + c), await load(prelude + f)];
const minimalSha = [await load(minimal[0]), await load(minimal[1])];
const token = '0123456789abcdef0123456789abcdef';
const value = `ik1 in_flight ${token} 1700000000 0 - -\n["fp","t","a"]\n`;
const keys = (k) => [`${tag}:rec:${k}`, `${tag}:idx:in_flight`, `${tag}:idx:done`, `${tag}:idx:needs_reconciliation`, `${tag}:exp`];

const cases = {
  'floor: SET NX, SET XX': async (k) => {
    await redis.set(`${tag}:floor:${k}`, value, 'NX');
    await redis.set(`${tag}:floor:${k}`, value, 'XX');
  },
  'minimal fenced, indexed pair': async (k) => {
    await redis.evalsha(minimalSha[0], 2, `${tag}:min:${k}`, `${tag}:min:if`, value, k, 1700000000);
    await redis.evalsha(minimalSha[1], 3, `${tag}:min:${k}`, `${tag}:min:if`, `${tag}:min:done`, `done ${value}`, k, value.slice(0, 40), 1800000000);
  },
};
for (const name of Object.keys(variants)) {
  cases[name] = async (k) => {
    const [c, f] = sha[name];
    const claimed = await redis.evalsha(c, 5, ...keys(k), k, 'in_flight', token, '1700000000', '0', '-', '-', '["fp","t","a"]', '');
    const done = await redis.evalsha(f, 5, ...keys(k), k, token, '1900000000', '[201,"application/json",[],"7b7d"]');
    if (claimed !== 1 || done !== 1) throw new Error(`redis-scripts: ${name} answered ${claimed}, ${done}`);
  };
}

const times = Object.fromEntries(Object.keys(cases).map((n) => [n, []]));
let i = 0;
const names = Object.keys(cases);
for (let round = 0; round < rounds; round++) {
  for (let c = 0; c < names.length; c++) {
    const name = names[(c + round) % names.length];
    const start = process.hrtime.bigint();
    for (let j = 0; j < block; j++) await cases[name](`k${i++}`);
    times[name].push(Number(process.hrtime.bigint() - start) / 1e3 / block);
  }
}
const median = (v) => [...v].sort((a, b) => a - b)[v.length >> 1];
const floor = median(times[names[0]]);
const info = await redis.info('server');
const version = /redis_version:(\S+)/.exec(info)?.[1];
console.log(`Redis ${version} on port ${port}${cluster ? ' (a cluster master)' : ''}, ${rounds} rounds of ${block} intents per case, medians (µs per intent):\n`);
console.log('| case | µs | / floor |');
console.log('|---|---|---|');
for (const name of names) console.log(`| ${name} | ${median(times[name]).toFixed(1)} | ${(median(times[name]) / floor).toFixed(2)} |`);

// Clean up: the run's keys are all under its hash tag.
let cursor = '0';
do {
  const [next, found] = await redis.scan(cursor, 'MATCH', `${tag}*`, 'COUNT', 1000);
  cursor = next;
  if (found.length > 0) await redis.del(...found);
} while (cursor !== '0');
redis.disconnect();
