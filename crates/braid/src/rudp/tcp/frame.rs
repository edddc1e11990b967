//! The framing of datagrams on a TCP byte stream: each datagram is a 2-byte
//! big-endian length followed by that many bytes.
//!
//! Main types: [`FrameReader`] (splits what TCP delivers back into
//! datagrams, whatever the read boundaries) and [`FrameWriter`] (queues
//! framed datagrams for writing, within a byte bound).
//!
//! Invariants: a length is between 1 and [`MAX_FRAME`] (braid's largest
//! datagram); any other length is a [`BadLength`] and the stream is
//! useless from there on (there is no way to find the next frame). A
//! writer never holds more than its bound of unwritten bytes: a datagram
//! that does not fit is refused, not queued.

use braid_core::wire::MAX_DATAGRAM_SIZE;

/// Largest datagram a frame may carry (braid's largest datagram).
pub const MAX_FRAME: usize = MAX_DATAGRAM_SIZE;
/// Bytes of the length prefix.
pub const HEADER: usize = 2;
/// Bytes a [`FrameReader`] holds: room for many frames per read.
pub const READ_BUFFER: usize = 64 << 10;

/// A frame announced a length outside `1..=MAX_FRAME`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("bad frame length {0} (expected 1..={MAX_FRAME})")]
pub struct BadLength(pub usize);

/// Splits a byte stream into frames. Fill [`FrameReader::spare`], report
/// it with [`FrameReader::filled`], then take frames with
/// [`FrameReader::next_frame`] until it returns `None`.
#[derive(Debug)]
pub struct FrameReader {
    buf: Vec<u8>,
    /// Unparsed bytes are `buf[start..end]`.
    start: usize,
    end: usize,
}

impl Default for FrameReader {
    fn default() -> Self {
        FrameReader {
            buf: vec![0; READ_BUFFER],
            start: 0,
            end: 0,
        }
    }
}

impl FrameReader {
    /// The next complete frame's bytes, if one is buffered.
    ///
    /// # Errors
    /// [`BadLength`] when the next frame's length is out of range.
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, BadLength> {
        let avail = self.end - self.start;
        if avail < HEADER {
            return Ok(None);
        }
        let len = usize::from(u16::from_be_bytes([
            self.buf[self.start],
            self.buf[self.start + 1],
        ]));
        if len == 0 || len > MAX_FRAME {
            return Err(BadLength(len));
        }
        if avail < HEADER + len {
            return Ok(None);
        }
        let from = self.start + HEADER;
        self.start = from + len;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        Ok(Some(&self.buf[from..from + len]))
    }

    /// Where the next read goes: never empty while a frame is incomplete
    /// (the buffer holds at least one whole frame).
    pub fn spare(&mut self) -> &mut [u8] {
        if self.start > 0 && self.buf.len() - self.end < HEADER + MAX_FRAME {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.buf[self.end..]
    }

    /// Notes that `n` bytes were read into [`FrameReader::spare`].
    pub fn filled(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }
}

/// Framed datagrams waiting to be written, at most `bound` bytes.
#[derive(Debug)]
pub struct FrameWriter {
    buf: Vec<u8>,
    /// Bytes before this were written.
    written: usize,
    bound: usize,
}

impl FrameWriter {
    /// A writer holding at most `bound` unwritten bytes.
    pub fn new(bound: usize) -> FrameWriter {
        FrameWriter {
            buf: Vec::new(),
            written: 0,
            bound,
        }
    }

    /// Queues `datagram` as one frame; false (and nothing queued) if it is
    /// empty, too large, or does not fit the bound.
    pub fn push(&mut self, datagram: &[u8]) -> bool {
        let len = datagram.len();
        if len == 0 || len > MAX_FRAME || self.pending().len() + HEADER + len > self.bound {
            return false;
        }
        if self.written > 0 && self.written >= self.buf.len() / 2 {
            self.buf.drain(..self.written);
            self.written = 0;
        }
        // Fits: `len` <= MAX_FRAME < 2^16.
        self.buf.extend_from_slice(&(len as u16).to_be_bytes());
        self.buf.extend_from_slice(datagram);
        true
    }

    /// The bytes still to write.
    pub fn pending(&self) -> &[u8] {
        &self.buf[self.written..]
    }

    /// Notes that the first `n` pending bytes were written.
    pub fn advance(&mut self, n: usize) {
        self.written = (self.written + n).min(self.buf.len());
        if self.written == self.buf.len() {
            self.buf.clear();
            self.written = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(d: &[u8]) -> Vec<u8> {
        let mut w = FrameWriter::new(1 << 20);
        assert!(w.push(d));
        w.pending().to_vec()
    }

    /// Reads `bytes` as a socket would: at most what `spare` offers per
    /// read.
    fn feed(r: &mut FrameReader, bytes: &[u8]) {
        let s = r.spare();
        let n = bytes.len().min(s.len());
        s[..n].copy_from_slice(&bytes[..n]);
        r.filled(n);
        assert_eq!(n, bytes.len(), "room for the test's reads");
    }

    fn drain(r: &mut FrameReader) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(f) = r.next_frame().unwrap() {
            out.push(f.to_vec());
        }
        out
    }

    #[test]
    fn two_frames_in_one_read() {
        let mut bytes = frame(&[1; 10]);
        bytes.extend(frame(&[2; 1472]));
        let mut r = FrameReader::default();
        feed(&mut r, &bytes);
        assert_eq!(drain(&mut r), vec![vec![1; 10], vec![2; 1472]]);
    }

    #[test]
    fn a_frame_split_across_reads() {
        let bytes = frame(&[7; 300]);
        let mut r = FrameReader::default();
        // Split inside the header, then inside the body.
        feed(&mut r, &bytes[..1]);
        assert!(drain(&mut r).is_empty());
        feed(&mut r, &bytes[1..100]);
        assert!(drain(&mut r).is_empty());
        feed(&mut r, &bytes[100..]);
        assert_eq!(drain(&mut r), vec![vec![7; 300]]);
    }

    #[test]
    fn byte_by_byte_reads_and_wraparound() {
        // Enough frames to go round the buffer many times, read one byte
        // at a time and in odd-sized pieces.
        let frames: Vec<Vec<u8>> = (0..200u32)
            .map(|i| vec![i as u8; 1 + (i as usize * 37) % MAX_FRAME])
            .collect();
        let stream: Vec<u8> = frames.iter().flat_map(|f| frame(f)).collect();
        for piece in [1, 3, 1000, 4096] {
            let mut r = FrameReader::default();
            let mut got = Vec::new();
            for chunk in stream.chunks(piece) {
                let mut rest = chunk;
                while !rest.is_empty() {
                    let n = rest.len().min(r.spare().len());
                    feed(&mut r, &rest[..n]);
                    rest = &rest[n..];
                    got.extend(drain(&mut r));
                }
            }
            assert_eq!(got, frames, "pieces of {piece}");
        }
    }

    #[test]
    fn bad_lengths_are_errors() {
        for len in [0u16, MAX_FRAME as u16 + 1, u16::MAX] {
            let mut r = FrameReader::default();
            feed(&mut r, &len.to_be_bytes());
            assert_eq!(r.next_frame(), Err(BadLength(len as usize)));
        }
    }

    #[test]
    fn the_writer_keeps_its_bound() {
        let mut w = FrameWriter::new(3 * (HEADER + 100));
        assert!(!w.push(&[]), "empty");
        assert!(!w.push(&[0; MAX_FRAME + 1]), "too large");
        for _ in 0..3 {
            assert!(w.push(&[1; 100]));
        }
        assert!(!w.push(&[1; 100]), "full");
        w.advance(HEADER + 100);
        assert!(w.push(&[2; 100]), "room again");
        assert_eq!(w.pending().len(), 3 * (HEADER + 100));
        let mut r = FrameReader::default();
        feed(&mut r, w.pending());
        assert_eq!(
            drain(&mut r),
            vec![vec![1; 100], vec![1; 100], vec![2; 100]]
        );
        w.advance(w.pending().len());
        assert!(w.pending().is_empty());
    }
}
