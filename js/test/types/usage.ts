// Compiled (never run) by types.test.js: the shipped .d.ts must describe real use.
import {
  IntentkeyError,
  IntentkeyTrapError,
  answerLines,
  createKeyer,
  newUuidKey,
  uuidKey,
  type DeriveResult,
  type ErrorCode,
  type Intent,
  type Keyer,
} from 'intentkey';

const keyer: Keyer = createKeyer({ secret: new Uint8Array(32), policy: { version: 1 } });
createKeyer({ secret: 'ab'.repeat(32) });
createKeyer({ secret: 'ab'.repeat(32), policy: '{"version":1}' });

const intent: Intent = { tenantId: 't', actionType: 'pix.send', payload: '{"amount":"1.00"}', intentEpoch: 1_700_000_000n };
const key: string = keyer.derive({ ...intent, payload: { amount: '1.00' }, intentEpoch: 1 });
const results: DeriveResult[] = keyer.deriveMany([intent, intent]);
for (const r of results) {
  if (r.error) {
    const code: ErrorCode = r.error.code;
    const field: string | undefined = r.error.field;
    console.log(code, field);
  } else {
    const k: string = r.key;
    console.log(k);
  }
}
const material: string = keyer.material(intent);
const short: string = keyer.intentKey('t', 'i', 40);
const full: string = keyer.intentKey('t', 'i');
const fp: string = keyer.fingerprint('t', 'pix.send', { amount: '1.00' });
const same: boolean = keyer.fingerprintMatches('t', 'pix.send', '{}', fp);
const fpm: string = keyer.fingerprintMaterial('t', 'pix.send', '{}');
keyer.dispose();
const u1: string = newUuidKey();
const u2: string = uuidKey(new Uint8Array(16));
const lines: string[] = answerLines(['{}']);
try {
  createKeyer({ secret: '' });
} catch (e) {
  if (e instanceof IntentkeyError) console.log(e.code satisfies ErrorCode, e.field);
  if (e instanceof IntentkeyTrapError) console.log(e.message);
}
console.log(key, material, short, full, same, fpm, u1, u2, lines);

// @ts-expect-error an intent needs an epoch
keyer.derive({ tenantId: 't', actionType: 'a', payload: '{}' });
// @ts-expect-error the secret is required
createKeyer({});

// The claim side.
import {
  IntentkeyRefused,
  claims,
  createEndpoint,
  createGuard,
  init,
  jsonResponse,
  memoryStore,
  pgStore,
  redisStore,
  mysqlStore,
  dynamoStore,
  refused,
  sqliteStore,
  type ClaimRecord,
  type RedisStore,
  type MysqlStore,
  type DynamoStore,
  type Finished,
  type Guard,
  type LookupAnswer,
  type RecoverResult,
  type Reply,
  type RunResult,
  type Store,
} from 'intentkey';

const record: ClaimRecord = {
  key: 'k',
  fingerprint: 'fp',
  tenantId: 't',
  actionType: 'a',
  status: 'in_flight',
  ownerToken: 'ab'.repeat(16),
  response: null,
  createdAt: 1_700_000_000,
  expiresAt: null,
  lookups: 0,
  nextLookupAt: null,
};
const decision = claims.decideExisting(record, 'fp');
if (decision.outcome === 'done') {
  const bytes: Uint8Array = decision.response.body;
  console.log(bytes.byteLength, decision.response.headers.length);
}
const endpoint = createEndpoint({
  secret: 'ab'.repeat(32),
  profile: 'stripe',
  replayHeaders: ['ETag'],
  maxBodyBytes: 65_536,
  policies: { 'POST /orders': { version: 1 } },
});
const header: string = endpoint.headerName;
const admission = endpoint.admit({ tenantId: 't', method: 'POST', route: '/orders', keyValues: ['k'], body: new Uint8Array() });
if (admission.tag === 'guarded') console.log(admission.attempt.key, admission.attempt.fingerprint);
else if (admission.tag === 'refused') console.log(admission.reply.status, admission.reply.headers, admission.reply.body.byteLength);
const answer: Reply | null = endpoint.answer(decision, 1_700_000_000);
const busy: Reply | null = endpoint.answer('in-flight');
const replies: Reply[] = [endpoint.tooLarge(), endpoint.unavailable(0), endpoint.failed(0n)];
console.log(header, answer?.status, busy, replies.length);
void init().then(() => undefined);
// @ts-expect-error not a profile
createEndpoint({ secret: '', profile: 'soap' });
const recovery = claims.decideRecovery(record, 'unknown', false, 1_700_000_060);
if (recovery.action === 'check-later') console.log(recovery.nextLookupAt);
const cls: 'terminal' | 'released' | 'ambiguous' = claims.classify({ answered: jsonResponse(429, {}) });
const token: string = claims.ownerToken(new Uint8Array(16));
console.log(cls, token, claims.defaultRules().releaseStatuses, claims.defaultStaleAfterSeconds());

const mem = memoryStore();
const lite: Store = sqliteStore(':memory:', { busyTimeoutMs: 5000 });
const guard: Guard = createGuard({
  store: mem,
  keyer,
  endpoint,
  ttlSeconds: 86_400,
  releaseStatuses: [429, 503],
  fastCompletion: false,
  staleAfterSeconds: 300,
  now: () => 0,
});
async function claimSide(): Promise<void> {
  const pgs = await pgStore({ host: '127.0.0.1', database: 'test' }, { schema: 'ik' });
  await pgs.close();
  const rs: RedisStore = await redisStore({ url: 'redis://127.0.0.1:6379/1', prefix: 'ik' });
  const rsKind: 'redis' = rs.kind;
  void rsKind;
  await rs.close();
  await redisOnly({ client: rs.client });
  const cluster: RedisStore = await redisStore({ url: 'redis+cluster://127.0.0.1:7000,127.0.0.1:7001?prefix=ik&wait=1', waitTimeoutMs: 500 });
  const isCluster: boolean = cluster.cluster;
  void isCluster;
  await redisOnly({ client: cluster.client, prefix: 'ik', wait: 1 });
  // @ts-expect-error a client or a URL, not both
  await redisOnly({ client: {}, url: 'redis://127.0.0.1:6379' });
  // @ts-expect-error wait is a number of replicas
  await redisOnly({ url: 'redis://127.0.0.1:6379', wait: 'all' });
  const ms: MysqlStore = await mysqlStore({ url: 'mysql://root@127.0.0.1:3306/test', schema: 'ik' });
  const msKind: 'mysql' = ms.kind;
  void msKind;
  await mysqlOnly({ pool: ms.db });
  await ms.close();
  const ds: DynamoStore = await dynamoStore({ url: 'dynamodb://127.0.0.1:4567/payments?region=us-east-1' });
  const dsKind: 'dynamodb' = ds.kind;
  const dsTable: string = ds.table;
  void dsKind;
  void dsTable;
  await dynamoOnly({ client: ds.client, table: 'payments' });
  await dynamoOnly({ client: ds.client });
  await ds.close();
  // @ts-expect-error a URL or a client, not both
  await dynamoOnly({ client: {}, url: 'dynamodb://aws/payments' });
  // @ts-expect-error with a URL the table is in the URL
  await dynamoOnly({ url: 'dynamodb://aws/payments', table: 'other' });
  const r: RunResult = await guard.run({ intent }, async (key) => jsonResponse(201, { key }, [['Location', '/p/1']]));
  const r2 = await guard.run({ key: 'k', tenantId: 't', actionType: 'a', fingerprint: 'fp' }, () => ({
    status: 200,
    contentType: 'text/plain',
    body: 'ok',
  }));
  await guard.run({ key: 'k3', tenantId: 't', actionType: 'a', fingerprint: 'fp' }, () => ({
    status: 200,
    contentType: 'application/pdf',
    body: new Uint8Array([0xff]),
  }));
  const replayed: Uint8Array = r2.response.body;
  console.log(replayed);
  const finished: Finished | undefined = r.finished;
  console.log(r.outcome, r.response.status, r.response.headers, r.replayed, r2.key, finished, lite.kind);
  await guard.run({ key: 'k2', tenantId: 't', actionType: 'a', fingerprint: 'fp' }, async () => {
    throw refused(jsonResponse(503, { retry: true }));
  });
  const e: IntentkeyRefused = new IntentkeyRefused(null);
  console.log(e.response);
  const found: LookupAnswer = { found: jsonResponse(200, {}) };
  const rec: RecoverResult = await guard.recover({
    key: 'k',
    lookup: async () => found,
    readYourWrites: true,
    effect: async () => jsonResponse(201, {}),
  });
  if (rec.outcome === 'applied' && rec.action === 'check-later') console.log(rec.lookups);
  if (rec.outcome === 'not-due') console.log(rec.dueAt);
  const sync: RecoverResult = guard.recoverSync({ key: 'k', lookup: () => 'unknown' });
  console.log(sync.outcome, await guard.due({ limit: 10 }));
  await guard.recoverAll({ lookup: () => 'unknown' });
  const purged: number = await guard.purge();
  const seen: ClaimRecord | null = await guard.inspect('k');
  const stuck: ClaimRecord[] = await guard.list('needs_reconciliation');
  console.log(purged, seen?.ownerToken, stuck.length);
}
void claimSide;
// The adapters.
import { idempotency } from 'intentkey/express';
import { idempotency as honoIdempotency, idempotencyOf, withIdempotency } from 'intentkey/fetch';
import { memoryStore as memoryOnly } from 'intentkey/stores/memory';
import { sqliteStore as sqliteOnly } from 'intentkey/stores/sqlite';
import { pgStore as pgOnly } from 'intentkey/stores/pg';
import { redisStore as redisOnly } from 'intentkey/stores/redis';
import { mysqlStore as mysqlOnly } from 'intentkey/stores/mysql';
import { dynamoStore as dynamoOnly } from 'intentkey/stores/dynamodb';

const mw = idempotency({
  secret: 'ab'.repeat(32),
  store: memoryOnly(),
  profile: 'ietf',
  tenant: (req) => String(req.headers['x-tenant']),
  keyRequired: true,
  maxBodyBytes: 1 << 20,
  replayHeaders: ['ETag'],
  releaseStatuses: [429, 503],
  onError: (error, context) => console.log(error, context.phase, context.key),
});
mw({}, {}, (err?: unknown) => console.log(err));
const onError: (err: unknown, req: any, res: any, next: (err?: unknown) => void) => void = mw.onError;
console.log(onError, mw.endpoint.headerName, mw.guard.rules);
// @ts-expect-error the store is required
idempotency({ secret: 'ab'.repeat(32) });

const fetchHandler = withIdempotency(
  async (request: Request, env: { DB: string }) => {
    const ctx = idempotencyOf(request);
    return new Response(ctx === undefined ? 'unguarded' : `${ctx.key} ${ctx.tenantId} ${env.DB}`);
  },
  { secret: new Uint8Array(32), store: memoryOnly(), tenant: (request, env) => `${request.method}${env.DB}` },
);
const served: Promise<Response> = fetchHandler(new Request('http://x/'), { DB: 'd' });
const honoMw = honoIdempotency({ secret: 'ab'.repeat(32), store: memoryOnly(), profile: 'ofb' });
console.log(served, honoMw, sqliteOnly, pgOnly);

// A keyring instead of one secret: keyer, endpoint and adapters take it.
const ring = {
  secrets: [
    { id: '2026-11', activeFrom: 0, secret: 'ab'.repeat(32) },
    { id: '2026-12', activeFrom: 1_800_000_000n, secret: new Uint8Array(32) },
  ],
  windowSeconds: 86_400,
};
const rotating: Keyer = createKeyer({ keyring: ring });
const atKey: string = rotating.intentKeyAt('t1', 'i-1', 1_800_000_000, 40);
const atFingerprint: string = rotating.fingerprintAt('t1', 'pix.send', { amount: '1' }, 1_800_000_000n);
void atKey;
void atFingerprint;
// @ts-expect-error: one secret or a keyring, not both
createKeyer({ secret: 'ab'.repeat(32), keyring: ring });

// The journal: steps and tool calls keyed by the run.
import { createJournal, type Journal, type JournalEvent, type Run } from 'intentkey';
const run: Run = { tenantId: 'acme', intentId: 'run-42', intentEpoch: 1_700_000_000 };
const journal: Journal = createJournal({
  store: memoryStore(),
  keyer,
  maxOutputBytes: 1 << 20,
  staleAfterSeconds: 600,
  observe: (e: JournalEvent) => console.log(e.kind, e.outcome),
});
async function agentSide(): Promise<void> {
  const plan: { text: string } = await journal.step(run, 'plan', async () => ({ text: 'hi' }), { input: ['prompt'] });
  const paid: { payment: string } = await journal.toolCall(
    run,
    { tool: 'pix.send', arguments: { amount: '1' } },
    async (key: string) => ({ payment: key }),
    { lookup: async () => 'unknown' as const, readYourWrites: false },
  );
  const attempt = keyer.stepAttempt(run, 'plan', { any: 'json' });
  const call = keyer.toolCallAttempt(run, 'pix.send', '{"amount":"1"}');
  const recorded: string | undefined = claims.stepAnswer('plan', { tag: 'done', val: claims.stepOutput('plan', '{}') });
  console.log(plan.text, paid.payment, attempt.key, call.fingerprint, recorded);
  // @ts-expect-error a run needs its recorded intent id
  await journal.step({ tenantId: 't', intentEpoch: 0 }, 'plan', () => 1);
}
void agentSide;

// Waiting for the first attempt: the adapters, the guard, the journal and the endpoint take `wait`.
import type { WaitOptions, ServeResult, PgStore } from 'intentkey';
import { LISTENER_APPLICATION_NAME } from 'intentkey/stores/pg';
const waitFor: WaitOptions = { maxMs: 5000 };
idempotency({ secret: 'ab'.repeat(32), store: memoryOnly(), wait: waitFor });
withIdempotency(async () => new Response('ok'), { secret: 'ab'.repeat(32), store: memoryOnly(), wait: { maxMs: 200 } });
honoIdempotency({ secret: 'ab'.repeat(32), store: memoryOnly(), wait: {} });
// @ts-expect-error wait takes maxMs only
idempotency({ secret: 'ab'.repeat(32), store: memoryOnly(), wait: { maxMss: 5000 } });
// @ts-expect-error maxMs is milliseconds
createEndpoint({ secret: 'ab'.repeat(32), wait: { maxMs: '5s' } });
const waitingEndpoint = createEndpoint({ secret: 'ab'.repeat(32), wait: { maxMs: 1000 } });
const endpointWait: number = waitingEndpoint.waitMaxMs;
const waitingGuard: Guard = createGuard({ store: memoryStore(), keyer, endpoint: waitingEndpoint, wait: { maxMs: 2000 } });
const guardWait: number = waitingGuard.waitMaxMs;
createJournal({ store: memoryStore(), keyer, wait: { maxMs: 1000 } });
async function waitingSide(): Promise<void> {
  const aborter = new AbortController();
  const r: RunResult = await waitingGuard.run({ intent }, async (key) => jsonResponse(201, { key }), {
    wait: { maxMs: 500 },
    signal: aborter.signal,
  });
  const s: ServeResult = await waitingGuard.serve(
    { tenantId: 't', method: 'POST', route: '/x', keyValues: ['k'], body: '{}' },
    async () => ({ status: 201, headers: [], body: new Uint8Array() }),
    { signal: aborter.signal },
  );
  const waited: number | undefined = s.waitedMs;
  const pgs: PgStore = await pgStore({ host: '127.0.0.1', database: 'test' }, { schema: 'ik', notify: true });
  const on: boolean = pgs.notifying;
  await pgs.watch('k', 100);
  // @ts-expect-error notify is true or false
  await pgStore({}, { notify: 'auto' });
  console.log(r.outcome, waited, on, endpointWait, guardWait, LISTENER_APPLICATION_NAME);
}
void waitingSide;

// Faults and telemetry: the store deadline, a tracer and a meter, the records gauge, a store's cheap count.
import { trace, metrics } from '@opentelemetry/api';
import { observeRecords as observe } from 'intentkey';
async function faultsAndTelemetry(): Promise<void> {
  const store = memoryStore();
  const g = createGuard({ store, storeDeadlineMs: 1000, tracer: trace.getTracer('app'), meter: metrics.getMeter('app') });
  const deadline: number = g.storeDeadlineMs;
  const stop: () => void = observe(store, { meter: metrics.getMeter('app') });
  const counted: { count: number; oldest: number | null } = store.count('in-flight');
  const mw = idempotency({ secret: 'ab'.repeat(32), store, storeDeadlineMs: 500, tracer: trace.getTracer('app'), onError: (_e, c) => console.log(c.phase === 'release') });
  void mw;
  console.log(deadline, counted, claims.storeDeadlineMs());
  stop();
}
void faultsAndTelemetry;
