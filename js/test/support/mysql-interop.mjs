// The Node side of the Rust/Node interop test (host/store/tests/stores.rs,
// mysql_node_and_rust_share_records: the MySQL store shared by Rust and Node):
// node mysql-interop.mjs URL KEY BODY.
// Runs one guarded effect answering BODY on the MySQL store at URL and prints
// { outcome, replayed, status, body } as JSON (see store-interop.mjs).
import { mysqlStore } from '../../src/stores/mysql.js';
import { storeInterop } from './store-interop.mjs';

await storeInterop((url) => mysqlStore({ url }));
