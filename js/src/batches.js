// deriveMany and answerLines hand their lists to the component in batches of at
// most 1,000 items and about 4 Mi characters (a longer item goes alone): the
// guest's memory then holds one batch at a time and reuses it. With a whole list
// in one call, the guest's memory grew in many small steps and, past a few
// hundred thousand items, V8 ran one full garbage collection after another
// while it grew (118 at 160,000 lines, against 2 at 100,000): the time grew
// with the square of the list (1,000,000 lines in one answerLines call: 691 s;
// in batches: about 10 s; bench/RESOURCES.md). Each item is answered on its
// own, so batches change no answer.
const BATCH_ITEMS = 1000;
const BATCH_CHARS = 4 << 20;

/** [start, end) index ranges cutting `items` into batches; one empty range for an empty list. */
function batchRanges(items, chars) {
  const ranges = [];
  let start = 0;
  let size = 0;
  for (let i = 0; i < items.length; i++) {
    size += chars(items[i]);
    if (i + 1 - start >= BATCH_ITEMS || size >= BATCH_CHARS) {
      ranges.push([start, i + 1]);
      start = i + 1;
      size = 0;
    }
  }
  if (start < items.length || items.length === 0) ranges.push([start, items.length]);
  return ranges;
}

/** `answer` applied batch by batch (see BATCH_ITEMS), its answers concatenated in order. */
export function inBatches(items, chars, answer) {
  const ranges = batchRanges(items, chars);
  if (ranges.length === 1) return answer(items);
  const out = [];
  for (const [start, end] of ranges) {
    for (const a of answer(items.slice(start, end))) out.push(a);
  }
  return out;
}
