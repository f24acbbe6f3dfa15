// intentkey/stores/dynamodb: records in one DynamoDB table through @aws-sdk/client-dynamodb 3.x. Node only.
import type { DynamoStore } from './types.js';

export type { DynamoStore, Store, WitRecord, WitResponse, WitCompletion, WitReplacement } from './types.js';

/** What dynamoStore takes: a URL (the store makes the client and close() destroys it) or a client the caller keeps. */
export type DynamoStoreOptions =
  | {
      /**
       * `dynamodb://HOST:PORT/TABLE` (a local endpoint over HTTP, e.g. dynalite) or
       * `dynamodb://aws/TABLE` (AWS), with an optional `?region=R`; no TABLE: the
       * default table, `intentkey`. Region and credentials come from AWS_REGION (or
       * AWS_DEFAULT_REGION), AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
       * AWS_SESSION_TOKEN (a local endpoint: us-east-1 and a placeholder key when
       * unset). Any other query option is refused.
       */
      url: string;
      client?: undefined;
      table?: undefined;
    }
  | {
      /** A DynamoDBClient (`new DynamoDBClient(…)` from @aws-sdk/client-dynamodb 3.x) the caller keeps. */
      client: object;
      /** The table (3 to 255 of a-z, A-Z, 0-9, `_`, `.`, `-`); default `intentkey`. */
      table?: string;
      url?: undefined;
    };

/**
 * Records in one DynamoDB table through @aws-sdk/client-dynamodb 3.x. The table,
 * its two indexes (`by_status`, `by_expiry`), every item and every request are
 * the core's (the component's `schema` export), the same the Rust store sends.
 * Resolves once the table and its indexes are ACTIVE: DescribeTable, and
 * CreateTable (on-demand capacity) when it finds none. An item is at most 400
 * KB: a record whose response cannot fit is refused before anything is sent
 * (IntentkeyError `response-too-large`, field `response`). An unknown option, in
 * the object or the URL's query, is an IntentkeyError `invalid-argument` whose
 * `field` names it; so is a table name DynamoDB refuses (`table`) and, for AWS,
 * no region (`region`) or no credentials (`credentials`). Failures are
 * `store-unavailable` (retryable: throttling, server errors, no answer) or
 * `store-failed`.
 */
export function dynamoStore(options: DynamoStoreOptions): Promise<DynamoStore>;

/** Compiles the component ahead of the first request (the main entry's init). */
export function init(): Promise<void>;
