// dynalite for the tests (scripts/dynalite.sh): in memory, tables created at
// once, on 127.0.0.1:PORT. dynalite 4.0.0 rethrows the "aborted" error of a
// request whose client left before sending all of its body (a process the
// kill trials SIGKILLed mid-request), and that ends the whole server. Such a
// request never reached its 'end', so dynalite never ran it: the server logs
// it and goes on. Any other uncaught error still ends it.
'use strict';
const dynalite = require('dynalite');

const port = Number(process.argv[2] || 4567);
process.on('uncaughtException', (e) => {
  if (e && (e.code === 'ECONNRESET' || e.message === 'aborted')) {
    console.error(`dynalite: a client left in the middle of a request (${e.message}); the request was not run`);
    return;
  }
  console.error(e);
  process.exit(1);
});
dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 }).listen(port, '127.0.0.1', () => {
  console.log(`dynalite: listening on 127.0.0.1:${port}`);
});
