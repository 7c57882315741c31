//! The byte format of the stateful targets' inputs: a reader that never
//! fails, and the matching writer for seeds.
//!
//! Every value is read little-endian from the next bytes; bytes past the end
//! read as zero, so every input decodes to some event sequence. The format is
//! this file's own (not `arbitrary`'s derive layout), so that the committed
//! corpora keep their meaning across `arbitrary` releases and the seed
//! generator can write inputs that decode exactly to the scenarios it means.

/// Reads values from fuzz input bytes.
#[derive(Clone, Debug)]
pub struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    /// A reader at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Input { data, pos: 0 }
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// Bytes read so far (at most the input's length).
    pub fn consumed(&self) -> usize {
        self.pos.min(self.data.len())
    }

    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        for b in &mut out {
            *b = self.data.get(self.pos).copied().unwrap_or(0);
            self.pos = self.pos.saturating_add(1);
        }
        out
    }

    /// One byte.
    pub fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }

    /// Two bytes, little-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take())
    }

    /// Four bytes, little-endian.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }

    /// Eight bytes, little-endian.
    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }

    /// One byte, its low bit.
    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }

    /// One byte as a choice among `n` (0 when `n` is 0).
    pub fn pick(&mut self, n: usize) -> usize {
        let b = usize::from(self.u8());
        if n == 0 { 0 } else { b % n }
    }

    /// One byte: true with probability `per256 / 256`.
    pub fn chance(&mut self, per256: u8) -> bool {
        self.u8() < per256
    }

    /// Up to `max` bytes, its length from one byte first.
    pub fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = usize::from(self.u8()).min(max);
        (0..n).map(|_| self.u8()).collect()
    }
}

/// Writes values in the format [`Input`] reads (for seed inputs).
#[derive(Clone, Debug, Default)]
pub struct Output {
    /// The bytes written.
    pub bytes: Vec<u8>,
}

impl Output {
    /// One byte.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.bytes.push(v);
        self
    }

    /// Two bytes, little-endian.
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.bytes.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Four bytes, little-endian.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.bytes.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Eight bytes, little-endian.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.bytes.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// A bool as one byte.
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(u8::from(v))
    }

    /// A byte string with its one-byte length first (at most 255 bytes).
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        let n = v.len().min(255);
        self.u8(n as u8);
        self.bytes.extend_from_slice(&v[..n]);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_output_writes_and_zeros_past_the_end() {
        let mut o = Output::default();
        o.u8(7)
            .u16(0x1234)
            .u32(0xDEAD_BEEF)
            .u64(u64::MAX)
            .bool(true)
            .bytes(b"ab");
        let mut i = Input::new(&o.bytes);
        assert_eq!(i.u8(), 7);
        assert_eq!(i.u16(), 0x1234);
        assert_eq!(i.u32(), 0xDEAD_BEEF);
        assert_eq!(i.u64(), u64::MAX);
        assert!(i.bool());
        assert_eq!(i.bytes(10), b"ab");
        assert!(i.is_empty());
        assert_eq!(i.u32(), 0);
        assert_eq!(i.consumed(), o.bytes.len());
    }
}
