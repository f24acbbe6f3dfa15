// Exact rewrites of the glue jco 1.12 generates, applied by build.mjs to
// vendor/**/intentkey.js. They change how bytes move across the boundary, never
// what moves: the same strings and the same layout. Each pattern must match (the
// build fails otherwise, e.g. after a jco upgrade), and the golden vectors, the
// claim tests and the browser test run on the rewritten glue.
//
// 1. dataView(memory): the generated one reads `memory.buffer` (a slow host
//    getter) on every field access. Growing a WebAssembly memory detaches its old
//    buffer (byteLength 0), so checking the cached buffer's byteLength is enough.
// 2. utf8Encode: an ASCII string (keys, tokens, tenants, media types, most JSON
//    bodies) is written straight into guest memory, in one pass (a JS loop for
//    short ones, TextEncoder.encodeInto for longer ones), instead of
//    TextEncoder.encode into a fresh array and a copy. In Node a longer string,
//    ASCII or not, is measured once (Buffer.byteLength), allocated at its exact
//    UTF-8 length and written once (Buffer's utf8Write). Anything else gets its
//    allocation grown (cabi_realloc) to the exact UTF-8 length, and is written
//    there by utf8Write in Node (no copy), elsewhere encoded as generated.
// 3. utf8 decode of guest strings: in Node, Buffer's utf8Slice over the cached
//    memory view instead of a fresh Uint8Array view and TextDecoder (the same
//    decoding, except that a leading U+FEFF is kept, as it must be: TextDecoder
//    strips it); elsewhere TextDecoder as generated.
// 4. lists of bytes (bodies, seeds, the release statuses) lowered into guest
//    memory with the cached byte view's set(src, ptr), and lifted out of it with
//    its slice(start, end) (a copy with a buffer of its own, as before), instead
//    of a fresh view of `memory.buffer` (the slow getter) each time.
// bench/glue.mjs measures them against the glue as generated (build.mjs
// --unpatched-glue keeps it); results in ../BENCHMARKS.md, "Node: the glue rewrites".

const SHORT = 64;

const rewrites = [
  {
    name: 'dataView',
    from: `  let dv = new DataView(new ArrayBuffer());
  const dataView = mem => dv.buffer === mem.buffer ? dv : dv = new DataView(mem.buffer);`,
    to: `  let dv = new DataView(new ArrayBuffer());
  let dvBuffer = dv.buffer;
  let u8 = new Uint8Array(dvBuffer);
  // Patched (scripts/glue.mjs): a grown memory detaches the cached buffer (byteLength 0).
  const memoryView = mem => {
    if (dvBuffer.byteLength === 0) {
      dvBuffer = mem.buffer;
      dv = new DataView(dvBuffer);
      u8 = new Uint8Array(dvBuffer);
    }
  };
  const dataView = mem => {
    if (dvBuffer.byteLength === 0) memoryView(mem);
    return dv;
  };
  const memoryBytes = mem => {
    if (dvBuffer.byteLength === 0) memoryView(mem);
    return u8;
  };
  // Node: Buffer's utf8Slice over the cached memory (same decoding as TextDecoder:
  // invalid bytes become U+FFFD); elsewhere TextDecoder as generated.
  const nodeBuffer = typeof Buffer === 'function' && typeof Buffer.prototype.utf8Slice === 'function' ? Buffer : null;
  let nodeView = null;
  function utf8DecodeShort(mem, ptr, len) {
    if (len === 0) return '';
    if (dvBuffer.byteLength === 0) memoryView(mem);
    if (nodeBuffer !== null) {
      if (nodeView === null || nodeView.buffer !== dvBuffer) nodeView = nodeBuffer.from(dvBuffer);
      return nodeView.utf8Slice(ptr, ptr + len);
    }
    return utf8Decoder.decode(new Uint8Array(dvBuffer, ptr, len));
  }`,
    count: 1,
  },
  {
    name: 'utf8Encode',
    from: `    let buf = utf8Encoder.encode(s);
    let ptr = realloc(0, 0, 1, buf.length);
    new Uint8Array(memory.buffer).set(buf, ptr);
    utf8EncodedLen = buf.length;
    return ptr;`,
    to: `    // Patched (scripts/glue.mjs): ASCII goes straight into guest memory, one pass.
    const n = s.length;
    if (n > ${SHORT} && nodeBuffer !== null) {
      // Node, a long string: its exact UTF-8 length (Buffer.byteLength), one
      // allocation, one write (utf8Write), ASCII or not.
      const len = nodeBuffer.byteLength(s, 'utf8');
      const ptr = realloc(0, 0, 1, len);
      if (dvBuffer.byteLength === 0) memoryView(memory);
      if (nodeView === null || nodeView.buffer !== dvBuffer) nodeView = nodeBuffer.from(dvBuffer);
      nodeView.utf8Write(s, ptr, len);
      utf8EncodedLen = len;
      return ptr;
    }
    let ptr = realloc(0, 0, 1, n);
    if (dvBuffer.byteLength === 0) memoryView(memory);
    if (n <= ${SHORT}) {
      const bytes = u8;
      let i = 0;
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) break;
        bytes[ptr + i] = c;
      }
      if (i === n) {
        utf8EncodedLen = n;
        return ptr;
      }
    } else {
      const { read, written } = utf8Encoder.encodeInto(s, u8.subarray(ptr, ptr + n));
      if (read === n && written === n) {
        utf8EncodedLen = n;
        return ptr;
      }
    }
    // Not ASCII. In Node: the allocation grown to the UTF-8 length (longer than
    // n, from Buffer.byteLength) and the string written there by Buffer's
    // utf8Write, with no copy in between.
    if (nodeBuffer !== null) {
      const len = nodeBuffer.byteLength(s, 'utf8');
      ptr = realloc(ptr, n, 1, len);
      if (dvBuffer.byteLength === 0) memoryView(memory);
      if (nodeView === null || nodeView.buffer !== dvBuffer) nodeView = nodeBuffer.from(dvBuffer);
      nodeView.utf8Write(s, ptr, len);
      utf8EncodedLen = len;
      return ptr;
    }
    // Elsewhere the whole string as the generated glue encodes it, the allocation
    // grown to its UTF-8 length.
    let buf = utf8Encoder.encode(s);
    ptr = realloc(ptr, n, 1, buf.length);
    new Uint8Array(memory.buffer).set(buf, ptr);
    utf8EncodedLen = buf.length;
    return ptr;`,
    count: 1,
  },
  {
    name: 'listLower',
    from: /\(new Uint8Array\(memory0\.buffer, (ptr\d+), (len\d+) \* (\d+)\)\)\.set\((src\d+)\);/g,
    to: 'memoryBytes(memory0).set($4, $1);',
    count: 'some',
  },
  {
    name: 'listLift',
    from: /new Uint8Array\(memory0\.buffer\.slice\((ptr\d+), (ptr\d+) \+ (len\d+) \* 1\)\)/g,
    to: 'memoryBytes(memory0).slice($1, $2 + $3)',
    count: 'some',
  },
  {
    name: 'utf8Decode',
    from: /utf8Decoder\.decode\(new Uint8Array\(memory0\.buffer, (ptr\d+), (len\d+)\)\)/g,
    to: 'utf8DecodeShort(memory0, $1, $2)',
    count: 'some',
  },
];

/** The glue with every rewrite applied; throws when a pattern does not match. */
export function patchGlue(source, file) {
  let out = source;
  for (const r of rewrites) {
    let n;
    if (typeof r.from === 'string') {
      n = out.split(r.from).length - 1;
      out = out.replace(r.from, r.to);
    } else {
      n = (out.match(r.from) ?? []).length;
      out = out.replace(r.from, r.to);
    }
    if ((r.count === 'some' && n === 0) || (typeof r.count === 'number' && n !== r.count)) {
      throw new Error(`glue rewrite ${r.name} matched ${n} times in ${file}; jco's output changed: revisit scripts/glue.mjs`);
    }
  }
  // The helpers the rewrites use are defined before their first use.
  if (out.indexOf('function utf8DecodeShort') > out.indexOf('utf8DecodeShort(memory0')) {
    throw new Error(`glue rewrite: utf8DecodeShort is used before it is defined in ${file}`);
  }
  if (out.indexOf('const memoryBytes') > out.indexOf('memoryBytes(memory0)')) {
    throw new Error(`glue rewrite: memoryBytes is used before it is defined in ${file}`);
  }
  return out;
}
