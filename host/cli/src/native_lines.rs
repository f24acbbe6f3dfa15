//! `derive --jsonl` on the native core, on every core: the input is read in
//! chunks that end on a line break, each chunk is cut into one contiguous
//! share per thread, and each thread answers its share's lines (UTF-8 check,
//! the core's answer, the output line) into its own buffer. The buffers are
//! written in share order, so the answers keep the input's order. Memory is
//! one chunk of input and its answers (more only for a line longer than a
//! chunk).

use std::io::{self, Read, Write};

use intentkey::{Policy, RequestAnswerer};

use crate::CliError;

/// Bytes of input per chunk.
const CHUNK: usize = 4 << 20;

/// Answers every line of `input` onto `out` on `threads` threads. Returns how
/// many lines were answered and how many with a key.
pub(crate) fn answer(
    mut input: impl Read,
    out: &mut impl Write,
    policy: &Policy,
    threads: usize,
) -> Result<(u64, u64), CliError> {
    // One answerer per thread, each with its own cached secret.
    let mut answerers: Vec<RequestAnswerer> = (0..threads.max(1))
        .map(|_| RequestAnswerer::new(policy.clone()))
        .collect();
    let mut outputs: Vec<Share> = answerers.iter().map(|_| Share::default()).collect();
    let (mut lines, mut keys) = (0u64, 0u64);
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK);
    let mut want = CHUNK;
    let mut eof = false;
    loop {
        while !eof && buf.len() < want {
            eof = read_more(&mut input, &mut buf, want)?;
        }
        // Complete lines only, unless the input has ended.
        let end = if eof {
            buf.len()
        } else {
            match buf.iter().rposition(|&b| b == b'\n') {
                Some(i) => i + 1,
                None => {
                    // One line longer than a chunk: read on until it ends.
                    want = buf.len() * 2;
                    continue;
                }
            }
        };
        want = CHUNK;
        answer_chunk(&buf[..end], &mut answerers, &mut outputs)?;
        for share in &mut outputs {
            out.write_all(&share.text)
                .map_err(|e| CliError::io(format!("writing output: {e}")))?;
            lines += share.lines;
            keys += share.keys;
            share.clear();
        }
        buf.drain(..end);
        if eof && buf.is_empty() {
            return Ok((lines, keys));
        }
    }
}

/// Reads once into `buf`, up to `want` bytes in all; true at the end of input.
fn read_more(input: &mut impl Read, buf: &mut Vec<u8>, want: usize) -> Result<bool, CliError> {
    let old = buf.len();
    buf.resize(want.max(old + 1), 0);
    loop {
        match input.read(&mut buf[old..]) {
            Ok(n) => {
                buf.truncate(old + n);
                return Ok(n == 0);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                buf.truncate(old);
                return Err(CliError::io(format!("reading input: {e}")));
            }
        }
    }
}

/// One thread's answers for its share of a chunk.
#[derive(Default)]
struct Share {
    text: Vec<u8>,
    lines: u64,
    keys: u64,
}

impl Share {
    fn clear(&mut self) {
        self.text.clear();
        self.lines = 0;
        self.keys = 0;
    }

    /// Answers every line of `share` (each ends with `\n`, but the input's
    /// last line may not).
    fn answer(&mut self, share: &[u8], answerer: &mut RequestAnswerer) {
        for line in share.split_inclusive(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\n").unwrap_or(line);
            // A line that is not UTF-8 never reaches the core: it is answered here.
            let answer = match std::str::from_utf8(line) {
                Ok(text) => answerer.answer_line(text),
                Err(_) => intentkey::request::unreadable_line_answer(),
            };
            self.lines += 1;
            self.keys += u64::from(is_key_answer(&answer));
            self.text.extend_from_slice(answer.as_bytes());
            self.text.push(b'\n');
        }
    }
}

/// Whether an answer line carries a key: key answers end `"<hex>"}`, error
/// answers `}}`.
pub(crate) fn is_key_answer(answer: &str) -> bool {
    answer.ends_with("\"}")
}

/// Cuts `chunk` (whole lines) into one contiguous share per thread, each
/// ending on a line break, and answers the shares at once.
fn answer_chunk(
    chunk: &[u8],
    answerers: &mut [RequestAnswerer],
    outputs: &mut [Share],
) -> Result<(), CliError> {
    let mut shares: Vec<&[u8]> = Vec::with_capacity(answerers.len());
    let mut rest = chunk;
    for left in (1..=answerers.len()).rev() {
        let cut = if left == 1 {
            rest.len()
        } else {
            let at = rest.len() / left;
            rest[at..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(rest.len(), |i| at + i + 1)
        };
        let (share, tail) = rest.split_at(cut);
        shares.push(share);
        rest = tail;
    }
    let mut work = shares
        .into_iter()
        .zip(answerers.iter_mut())
        .zip(outputs.iter_mut())
        .filter(|((share, _), _)| !share.is_empty());
    let Some(((mine, first), first_out)) = work.next() else {
        return Ok(());
    };
    std::thread::scope(|scope| {
        let workers: Vec<_> = work
            .map(|((share, answerer), output)| scope.spawn(move || output.answer(share, answerer)))
            .collect();
        first_out.answer(mine, first);
        workers
            .into_iter()
            .try_for_each(|worker| worker.join())
            .map_err(|_| CliError::io("a thread answering lines stopped".to_owned()))
    })
}
