// The Node side of the Rust/Node interop test (host/store/tests/stores.rs,
// dynamodb_node_and_rust_share_records: one DynamoDB table shared by Rust and
// Node): node dynamo-interop.mjs URL KEY BODY, URL as dynamodb://HOST:PORT/TABLE
// (or dynamodb://aws/TABLE). Runs one guarded effect answering BODY on the
// DynamoDB store at URL and prints { outcome, replayed, status, body } as JSON
// (see store-interop.mjs).
import { dynamoStore } from '../../src/stores/dynamodb.js';
import { storeInterop } from './store-interop.mjs';

await storeInterop((url) => dynamoStore({ url }));
