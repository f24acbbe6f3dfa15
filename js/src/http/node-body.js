// Reading a request body on Node (node:http's IncomingMessage, or the payload
// stream Fastify hands its preParsing hooks) without taking it from what runs
// next: the bytes read are given back to the stream (readable.unshift), so a body
// parser or the handler after the adapter reads the body exactly as it was sent.
// Reading stops one chunk past the limit: what was read then is enough for the
// core to answer 413, and the rest stays unread.

/** How long, after a refusal went out, the rest of a body is read and dropped before the connection is closed. */
const DISCARD_MS = 500;
/** How many bytes of the rest of a body are read and dropped before the connection is closed. */
const DISCARD_BYTES = 64 << 20;

/** Whether the stream has received its last byte (its 'end' may not be emitted yet). */
function atEnd(stream) {
  // IncomingMessage sets `complete` once the HTTP parser has seen the whole
  // message; any other stream: its state's `ended` (EOF pushed, not yet emitted).
  return stream.complete === true || stream._readableState?.ended === true;
}

/** Whether nobody has read the stream yet (so it can be read here and given back). */
export function unread(stream) {
  return (
    stream !== null &&
    typeof stream === 'object' &&
    typeof stream.read === 'function' &&
    typeof stream.unshift === 'function' &&
    stream.readableEnded === false &&
    stream.readableFlowing !== true
  );
}

/**
 * Reads `stream` up to `max` bytes (stopping once past it) and gives what it read
 * back to the stream. Resolves with { body, over }: body a Uint8Array (a view of
 * the bytes read), over true when the body is larger than `max` (body then holds
 * only its first bytes).
 * @param {import('node:stream').Readable} stream
 * @param {number} max
 * @returns {Promise<{ body: Uint8Array, over: boolean }>}
 */
export function peekBody(stream, max) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    let finished = false;
    function cleanup() {
      stream.removeListener('readable', onReadable);
      stream.removeListener('error', onError);
      stream.removeListener('end', onEnd);
      stream.removeListener('aborted', onAborted);
    }
    function done(over) {
      if (finished) return;
      finished = true;
      cleanup();
      const bytes = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
      // Given back before the stream can emit 'end': what reads it next gets every byte.
      if (size > 0) stream.unshift(bytes);
      resolve({ body: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength), over });
    }
    function onReadable() {
      let chunk;
      while ((chunk = stream.read()) !== null) {
        if (typeof chunk === 'string') chunk = Buffer.from(chunk, 'utf8');
        chunks.push(chunk);
        size += chunk.length;
        if (size > max) return done(true);
      }
      if (atEnd(stream)) done(false);
    }
    function onEnd() {
      // 'end' came before the last 'readable' was seen: the bytes cannot be given
      // back any more, but every one of them was read here.
      if (finished) return;
      finished = true;
      cleanup();
      const bytes = Buffer.concat(chunks, size);
      resolve({ body: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength), over: size > max, consumed: true });
    }
    function onError(e) {
      if (finished) return;
      finished = true;
      cleanup();
      reject(e);
    }
    function onAborted() {
      onError(new Error('intentkey: the client aborted the request before its body was read'));
    }
    // A small body usually arrives with its headers: when the parser has seen
    // the whole message and its bytes wait in the buffer, take them now.
    if (stream.readableLength > 0 && atEnd(stream)) {
      onReadable();
      if (finished) return;
    }
    stream.on('error', onError);
    stream.on('end', onEnd);
    stream.on('aborted', onAborted);
    stream.on('readable', onReadable);
  });
}

/**
 * After a refusal sent before the body was read to its end (peekBody stopped
 * past the limit, or read it and gave it back): reads what is left of the body
 * and drops it, as Node does for a body nobody read, so that the connection
 * serves the client's next request. Node no longer does it here, because the
 * stream was read. Bounded: once `res` has finished, for at most 500 ms and 64
 * MiB; past either, the socket is closed (the answer went out first). No
 * effect on a stream already ended, or when there is nothing left to read.
 * @param {import('node:stream').Readable} stream the request body (IncomingMessage, or Fastify's payload stream)
 * @param {import('node:http').ServerResponse} res the response the refusal was written to
 */
export function discardRest(stream, res) {
  if (stream.readableEnded || stream.destroyed) return;
  const socket = res.socket ?? stream.socket ?? null;
  let bytes = 0;
  let timer = null;
  function cleanup() {
    if (timer !== null) clearTimeout(timer);
    stream.removeListener('data', onData);
    stream.removeListener('end', cleanup);
    stream.removeListener('error', cleanup);
    stream.removeListener('close', cleanup);
  }
  function close() {
    cleanup();
    if (socket !== null && !socket.destroyed) {
      if (typeof socket.destroySoon === 'function') socket.destroySoon();
      else socket.destroy();
    }
  }
  function onData(chunk) {
    bytes += chunk.length;
    if (bytes > DISCARD_BYTES) close();
  }
  function start() {
    if (stream.readableEnded || stream.destroyed) return;
    timer = setTimeout(close, DISCARD_MS);
    timer.unref?.();
    stream.on('data', onData);
    stream.on('end', cleanup);
    stream.on('error', cleanup);
    stream.on('close', cleanup);
    stream.resume();
  }
  if (res.writableFinished) start();
  else res.once('finish', start);
}
