// A store in one DynamoDB table through @aws-sdk/client-dynamodb 3.x (an
// optional peer dependency). The table, its two indexes, every item and every
// request are the core's (crates/intentkey/src/claim/dynamo.rs, through the
// component's `schema` export: `dynamo-*`), the same the Rust store sends, so
// Node and Rust processes share one table and the same records
// (docs/stores.md, "DynamoDB"). Each request is the input of one API action in
// DynamoDB's own JSON form; this file only sends it with the SDK's low-level
// client (the JSON's `{ B: base64 }` values as bytes, and back) and hands the
// answer to the core.
//
// The claim is a PutItem conditioned on `attribute_not_exists(#key)`;
// completion, recovery writes and release are UpdateItem/DeleteItem
// conditioned on the owner token; a failed condition
// (ConditionalCheckFailedException) is "not written". Listing and purging
// query two sparse indexes, one Query per bucket, never a Scan. An item over
// DynamoDB's 400 KB is refused by the core before anything is sent
// (`response-too-large`). The operations are asynchronous, so the guard drives
// the core's claim flow through the `flows` resource.
import { IntentkeyError } from '../errors.js';
import { checkOptionNames } from '../endpoint.js';
import { ABORTED_FLAG, CLOSING, TRUSTED, dynamoLayout as core, storeError, closer } from './schema.js';

/** Compiles the component ahead of the first request (see the main entry's init). */
export { init } from '../node-core.js';

/** The options dynamoStore takes, and those a URL's query may carry. */
const OPTIONS = Object.freeze(['url', 'client', 'table']);
const URL_OPTIONS = Object.freeze(['region']);

/** How long one request may take (connecting included), as the Rust store. */
const REQUEST_TIMEOUT_MS = 10_000;
/** How long opening waits for a table (and its indexes) to become ACTIVE. */
const READY_TIMEOUT_MS = 60_000;
const READY_POLL_MS = 100;

/** The SDK command of each action the core names. */
const COMMANDS = Object.freeze({
  PutItem: 'PutItemCommand',
  GetItem: 'GetItemCommand',
  UpdateItem: 'UpdateItemCommand',
  DeleteItem: 'DeleteItemCommand',
  Query: 'QueryCommand',
  CreateTable: 'CreateTableCommand',
  DescribeTable: 'DescribeTableCommand',
});

/** What send() answers when a write's condition did not hold. */
const CONDITION_FAILED = Symbol('condition-failed');

/** The placeholder key a local endpoint is signed with (it checks the signature's form, not its value). */
const LOCAL_KEY = 'local';

async function loadSdk() {
  try {
    return await import('@aws-sdk/client-dynamodb');
  } catch (e) {
    throw new Error(
      'intentkey: dynamoStore needs @aws-sdk/client-dynamodb 3.x: npm install @aws-sdk/client-dynamodb@3',
      { cause: e },
    );
  }
}

function optionError(option, message) {
  return new IntentkeyError('invalid-argument', `dynamoStore: \`${option}\` ${message}`, option);
}

// --- DynamoDB's JSON <-> the SDK's values: only binary values differ. ---

/**
 * A request's input (DynamoDB's JSON, parsed) as the SDK takes it: every
 * attribute value `{ B: base64 }` as `{ B: bytes }`, everything else as it is.
 * (In DynamoDB's JSON an object whose only member is a string under "B" is a
 * binary attribute value: expression names map `#x` to strings, and every
 * other map holds attribute values, which are objects.)
 */
function toSdk(v) {
  if (Array.isArray(v)) return v.map(toSdk);
  if (v === null || typeof v !== 'object') return v;
  const keys = Object.keys(v);
  if (keys.length === 1 && keys[0] === 'B' && typeof v.B === 'string') return { B: Buffer.from(v.B, 'base64') };
  const out = {};
  for (const k of keys) out[k] = toSdk(v[k]);
  return out;
}

/** An SDK output value as plain JSON: bytes as base64, dates as ISO text, without the SDK's $metadata. */
function fromSdk(v) {
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64');
  if (v instanceof Date) return v.toISOString();
  if (Array.isArray(v)) return v.map(fromSdk);
  if (v === null || typeof v !== 'object') return v;
  const out = {};
  for (const [k, x] of Object.entries(v)) if (k !== '$metadata' && x !== undefined) out[k] = fromSdk(x);
  return out;
}

/** An SDK output as the JSON text the core reads. */
const jsonOf = (output) => JSON.stringify(fromSdk(output));

// --- Errors ---

/** Whether the service answered (an error DynamoDB sent, with its name), not a connection that failed. */
const answered = (e) => typeof e?.$metadata?.httpStatusCode === 'number' && typeof e.name === 'string';

/** The core's class of an error the service answered: by its name and its HTTP status. */
function classOf(e) {
  const status = e.$metadata.httpStatusCode;
  return core.classifyError(e.name, Number.isInteger(status) && status >= 0 && status <= 0xffff ? status : undefined);
}

/**
 * The SDK's error for `action` as a store error: what DynamoDB answered is
 * what the core says of its name and status (throttling, server errors, a 5xx
 * under a name it does not know: retryable; anything else failed); no answer (a refused or lost
 * connection, a timeout) is retryable. The message is the service's, which
 * never holds a secret key.
 */
function failure(e, action) {
  if (e instanceof IntentkeyError || e?.name === 'StoreError') return e;
  const message = e instanceof Error ? e.message || e.name : String(e);
  if (!answered(e)) {
    // A TypeError and its kin are a bug on this side (no request went out), not an outage.
    const bug = e instanceof TypeError || e instanceof RangeError || e instanceof SyntaxError;
    return storeError(bug ? 'failed' : 'unavailable', `dynamodb: ${action}: ${bug ? '' : 'no answer: '}${message}`, e);
  }
  const kind = classOf(e) === 'retryable' ? 'unavailable' : 'failed';
  return storeError(kind, `dynamodb: ${action}: ${e.name}: ${message}`, e);
}

/** A store error as what dynamoStore rejects with: the core's store-unavailable or store-failed. */
function startupError(e) {
  if (e instanceof IntentkeyError) return e;
  return new IntentkeyError(e.payload?.tag === 'unavailable' ? 'store-unavailable' : 'store-failed', e.message, undefined, { cause: e.cause ?? e });
}

/** The core's refusal of an answer (an item not in the layout) as a failed store error. */
function malformed(fn) {
  try {
    return fn();
  } catch (e) {
    throw storeError('failed', `dynamodb: ${e instanceof Error ? e.message : e}`, e);
  }
}

// --- Options ---

/**
 * `dynamodb://HOST:PORT/TABLE[?region=R]` (a local endpoint over HTTP, such as
 * dynalite) or `dynamodb://aws/TABLE[?region=R]` (AWS, over HTTPS), as
 * { local, endpoint, table, region }. Messages never echo the URL.
 */
function parseUrl(url) {
  const scheme = 'dynamodb://';
  if (!url.startsWith(scheme)) {
    throw optionError('url', 'must start with dynamodb://: dynamodb://HOST:PORT/TABLE (a local endpoint) or dynamodb://aws/TABLE (AWS)');
  }
  let rest = url.slice(scheme.length);
  const q = rest.indexOf('?');
  const query = q < 0 ? '' : rest.slice(q + 1);
  rest = q < 0 ? rest : rest.slice(0, q);
  const slash = rest.indexOf('/');
  const host = slash < 0 ? rest : rest.slice(0, slash);
  const table = slash < 0 ? '' : rest.slice(slash + 1);
  const decode = (text) => {
    try {
      return decodeURIComponent(text);
    } catch {
      throw optionError('url', 'has a query that is not percent-encoded text: ?region=R');
    }
  };
  let region;
  for (const pair of query.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const name = decode(eq < 0 ? pair : pair.slice(0, eq));
    if (!URL_OPTIONS.includes(name)) {
      throw optionError(name, `in the URL's query is not an option; the URL takes ${URL_OPTIONS.join(', ')}`);
    }
    region = decode(eq < 0 ? '' : pair.slice(eq + 1));
    if (region === '') throw optionError('region', 'in the URL is empty: ?region=us-east-1');
  }
  if (host === '') throw optionError('url', 'names no endpoint: dynamodb://HOST:PORT/TABLE (a local endpoint) or dynamodb://aws/TABLE (AWS)');
  if (host.includes('@')) {
    throw optionError('url', 'holds credentials: they come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or pass { client })');
  }
  const local = host !== 'aws';
  let endpoint;
  if (local) {
    try {
      endpoint = new URL(`http://${host}`);
    } catch {
      throw optionError('url', 'names an endpoint that is not HOST:PORT (dynamodb://127.0.0.1:4567/TABLE)');
    }
    if (endpoint.pathname !== '/' || endpoint.search !== '' || endpoint.hash !== '') {
      throw optionError('url', 'names an endpoint that is not HOST:PORT (dynamodb://127.0.0.1:4567/TABLE)');
    }
  }
  return { local, endpoint: local ? `http://${host}` : undefined, table, region };
}

/** A variable of the environment, undefined when unset or empty. */
function env(name) {
  const v = process.env[name];
  return v === undefined || v === '' ? undefined : v;
}

/** The client configuration for a parsed URL: region and credentials from the URL and the AWS variables. */
function clientConfig(parsed) {
  const region = parsed.region ?? env('AWS_REGION') ?? env('AWS_DEFAULT_REGION') ?? (parsed.local ? 'us-east-1' : undefined);
  if (region === undefined) {
    throw optionError('region', 'is not set for dynamodb://aws: set AWS_REGION (or AWS_DEFAULT_REGION), or add ?region=R to the URL');
  }
  const id = env('AWS_ACCESS_KEY_ID');
  const secret = env('AWS_SECRET_ACCESS_KEY');
  let credentials;
  if (id !== undefined && secret !== undefined) {
    credentials = { accessKeyId: id, secretAccessKey: secret, ...(env('AWS_SESSION_TOKEN') ? { sessionToken: env('AWS_SESSION_TOKEN') } : {}) };
  } else if (parsed.local) {
    credentials = { accessKeyId: LOCAL_KEY, secretAccessKey: LOCAL_KEY }; // not frozen: the SDK marks it
  } else {
    throw new IntentkeyError(
      'invalid-argument',
      'dynamoStore: no AWS credentials for dynamodb://aws: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary ones), or pass { client }: a DynamoDBClient with the credentials you use',
      'credentials',
    );
  }
  return {
    region,
    credentials,
    ...(parsed.local ? { endpoint: parsed.endpoint } : {}),
    requestHandler: { requestTimeout: REQUEST_TIMEOUT_MS, connectionTimeout: REQUEST_TIMEOUT_MS },
  };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A record store in one DynamoDB table; resolves once the table and its two
 * indexes are ACTIVE (created, on-demand, when DescribeTable does not find it).
 * @param {{ url?: string, client?: any, table?: string }} options `url`
 *   (dynamodb://HOST:PORT/TABLE for a local endpoint, dynamodb://aws/TABLE for
 *   AWS, each with ?region=R; the store makes the client and close() destroys
 *   it) or `client` (a DynamoDBClient the caller keeps) with `table` (default
 *   the core's, `intentkey`)
 */
export async function dynamoStore(options = {}) {
  if (options === null || typeof options !== 'object') {
    throw optionError('options', 'dynamoStore takes { url } (dynamodb://HOST:PORT/TABLE or dynamodb://aws/TABLE) or { client, table }');
  }
  checkOptionNames(options, OPTIONS, 'dynamoStore');
  const { url } = options;
  let client = options.client;
  if ((url === undefined) === (client === undefined)) {
    throw optionError(url === undefined ? 'url' : 'client', 'dynamoStore takes either { url } or { client, table }, not both and not neither');
  }
  let parsed;
  let table;
  if (url !== undefined) {
    if (typeof url !== 'string') throw optionError('url', 'must be a string: dynamodb://HOST:PORT/TABLE or dynamodb://aws/TABLE');
    if (options.table !== undefined) throw optionError('table', 'goes in the URL with { url }: dynamodb://HOST:PORT/TABLE');
    parsed = parseUrl(url);
    table = parsed.table === '' ? core.defaultTable() : parsed.table;
  } else {
    if (client === null || typeof client !== 'object' || typeof client.send !== 'function') {
      throw optionError('client', 'must be a DynamoDBClient (new DynamoDBClient(…) from @aws-sdk/client-dynamodb 3.x)');
    }
    if (options.table !== undefined && typeof options.table !== 'string') throw optionError('table', 'must be a string: the table name');
    table = options.table ?? core.defaultTable();
  }
  core.checkTable(table); // the core's: invalid-argument naming `table`
  const config = parsed === undefined ? undefined : clientConfig(parsed);

  const sdk = await loadSdk();
  const owned = client === undefined;
  if (owned) client = new sdk.DynamoDBClient(config);

  /** Sends one of the core's requests as is (the SDK's errors thrown as they are); the SDK's output. */
  async function raw(request) {
    const Command = sdk[COMMANDS[request.action]];
    if (Command === undefined) throw storeError('failed', `dynamodb: the core asked for an unknown action ${request.action} (a bug)`);
    return client.send(new Command(toSdk(JSON.parse(request.input))));
  }

  /** Sends one of the core's requests: its output, or CONDITION_FAILED; any other failure as a store error. */
  async function send(request) {
    try {
      return await raw(request);
    } catch (e) {
      if (answered(e) && classOf(e) === 'condition-failed') return CONDITION_FAILED;
      throw failure(e, request.action);
    }
  }

  /** The output of a request that has no condition. */
  async function output(request) {
    const out = await send(request);
    if (out === CONDITION_FAILED) throw storeError('failed', `dynamodb: a ${request.action} answered a failed condition (it has none)`);
    return out;
  }

  /** A write: true when its condition held (it wrote). */
  const written = async (request) => (await send(request)) !== CONDITION_FAILED;

  /**
   * Every page of a Query (the core's next-page requests), up to `want` items
   * (undefined: every page); `onPage(json)` for each as it comes.
   */
  async function pages(request, want, onPage) {
    let got = 0;
    for (let next = request; next !== undefined; ) {
      const out = await output(next);
      got += out.Items?.length ?? 0;
      const page = jsonOf(out);
      await onPage(page);
      next = core.nextPage(next, page, Math.min(got, 0xffffffff), want);
    }
  }

  /**
   * DescribeTable; CreateTable when it finds none (another process creating it
   * at the same moment, ResourceInUseException, is fine); then DescribeTable
   * until the table and both indexes are ACTIVE (at most 60 s).
   */
  async function ensureTable() {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    let created = false;
    for (;;) {
      try {
        if (core.tableReady(jsonOf(await raw(core.describeTable(table))))) return;
      } catch (e) {
        if (!(answered(e) && e.name === 'ResourceNotFoundException')) throw startupError(failure(e, 'DescribeTable'));
        if (!created) {
          try {
            await raw(core.createTable(table));
          } catch (e2) {
            if (!(answered(e2) && e2.name === 'ResourceInUseException')) throw startupError(failure(e2, 'CreateTable'));
          }
          created = true;
          continue;
        }
        // Created a moment ago: DescribeTable may not find it yet.
      }
      if (Date.now() > deadline) {
        throw new IntentkeyError('store-unavailable', `dynamodb: table ${table} and its indexes are not ACTIVE after ${READY_TIMEOUT_MS / 1000} s`);
      }
      await sleep(READY_POLL_MS);
    }
  }

  try {
    await ensureTable();
  } catch (e) {
    if (owned) client.destroy();
    throw e;
  }

  const closing = closer();

  return {
    kind: 'dynamodb',
    synchronous: false,
    [TRUSTED]: true,
    // Its operations read their signal only as signal.aborted (or not at all).
    [ABORTED_FLAG]: true,
    /** The DynamoDBClient. */
    client,
    /** The table's name. */
    table,

    // The core refuses an item over 400 KB (response-too-large, an
    // IntentkeyError) before anything is sent.
    insert: async (record) => written(core.insert(table, record)),

    async get(key) {
      const out = await output(core.get(table, key));
      if (out.Item === undefined) return undefined;
      return malformed(() => core.decode(JSON.stringify(fromSdk(out.Item))));
    },

    complete: async (c) => written(core.complete(table, c)),
    replace: async (r) => written(core.replace(table, r)),
    release: async (r) => written(core.release(table, r)),

    // One Query per bucket and status (the core's), each followed page by
    // page up to `limit` items; the core merges the pages in one order.
    async list(status, limit) {
      const all = await Promise.all(
        core.list(table, status, limit).map(async (request) => {
          const got = [];
          await pages(request, limit, (page) => got.push(page));
          return got;
        }),
      );
      return malformed(() => core.listed(limit, all.flat()));
    },

    // One Query per bucket, every page; each record a page names is deleted
    // with the core's conditional DeleteItem (a failed condition: a record
    // taken over or not yet expired since the index was read, left alone).
    async purge(now) {
      const counts = await Promise.all(
        core.purge(table, now).map(async (request) => {
          let deleted = 0;
          await pages(request, undefined, async (page) => {
            for (const del of malformed(() => core.purgeDeletes(table, now, page))) {
              if (await written(del)) deleted++;
            }
          });
          return deleted;
        }),
      );
      return counts.reduce((a, b) => a + b, 0);
    },

    /** Closed when close() is called (a guard's background work on this store stops). */
    [CLOSING]: closing,

    /** Destroys the client if the store made it (from a URL). */
    async close() {
      closing.close();
      if (owned) client.destroy();
    },
  };
}
