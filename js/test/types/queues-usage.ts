// Compiled (never run) by types.test.js: intentkey/bullmq and intentkey/pg-boss describe real use.
import { createGuard, createKeyer, memoryStore, refused } from 'intentkey';
import { IntentkeyQueueError, idempotentProcessor, type BullJob, type BullWorkerOptions, type QueueLookupAnswer } from 'intentkey/bullmq';
import { idempotentHandler, type BossJob, type QueueOutcomeEvent } from 'intentkey/pg-boss';

interface PaymentJob {
  paymentId: string;
  tenant: string;
  payment: { creditor_key: string; amount: string; currency: string };
  recordedAt: number;
}

const guard = createGuard({ store: memoryStore(), keyer: createKeyer({ secret: 'ab'.repeat(32) }), staleAfterSeconds: 60 });
const paid = new Map<string, { id: string }>();

const processor = idempotentProcessor<PaymentJob>({
  guard,
  intent: (job) => ({ tenantId: job.data.tenant, intentId: job.data.paymentId, actionType: 'pix.send', payload: job.data.payment }),
  effect: async (key, job) => {
    if (job.data.payment.amount === '0.00') throw refused();
    const receipt = { id: `pay_${key.slice(0, 8)}` };
    paid.set(key, receipt);
    return receipt;
  },
  lookup: (key): QueueLookupAnswer => {
    const found = paid.get(key);
    return found === undefined ? 'absent' : { found };
  },
  readYourWrites: true,
  onOutcome: ({ outcome, key, retryAt }) => console.log(outcome, key, retryAt),
});
const run: (job: BullJob<PaymentJob>, token?: string) => Promise<unknown> = processor;

const handler = idempotentHandler<PaymentJob>({
  guard,
  // fields mode: the key from the payload under the policy
  intent: async (job) => ({ tenantId: job.data.tenant, actionType: 'pix.send', payload: job.data.payment, intentEpoch: job.data.recordedAt }),
  effect: (key) => ({ key }),
  onOutcome: (e: QueueOutcomeEvent<BossJob<PaymentJob>>) => console.log(e.job.id, e.outcome),
  // a delivery that finds its intent in flight waits for it (up to 2 s)
  wait: { maxMs: 2000 },
});
const work: (jobs: BossJob<PaymentJob>[]) => Promise<unknown> = handler;

try {
  await run({ id: '1', data: {} as PaymentJob, moveToDelayed: async () => {} }, 'token');
} catch (e) {
  if (e instanceof IntentkeyQueueError) {
    const code: 'payload-conflict' | 'needs-reconciliation' | 'in-flight' | 'refused' = e.code;
    console.log(code, e.key, e.retryAt);
  }
}
console.log(work);

// @ts-expect-error an intent needs an intentId or an intentEpoch
idempotentHandler({ guard, intent: () => ({ tenantId: 't', actionType: 'a', payload: {} }), effect: () => null });
// @ts-expect-error the effect's result must be JSON
idempotentProcessor({ guard, intent: () => ({ tenantId: 't', intentId: 'i', actionType: 'a', payload: {} }), effect: () => new Map() });
// The Worker's options, checked for a Redis Cluster (a hash-tagged prefix).
const workerOptions: BullWorkerOptions = { connection: { isCluster: true }, prefix: '{bull}' };
idempotentProcessor({ guard, intent: () => ({ tenantId: 't', intentId: 'i', actionType: 'a', payload: {} }), effect: () => null }, workerOptions);
// @ts-expect-error the prefix is a string
idempotentProcessor({ guard, intent: () => ({ tenantId: 't', intentId: 'i', actionType: 'a', payload: {} }), effect: () => null }, { prefix: 7 });
