//! Byte order of a socklnd peer and small bounds-checked readers and writers for the handshake
//! and framing codecs.
//!
//! The acceptor connreq, the socklnd hello and the ksock header are sent in the sender's host
//! order; the receiver detects the order from a magic and swaps (`ksnc_flip`).
//! lustre: lnet/lnet/acceptor.c `lnet_accept()`, lnet/klnds/socklnd/socklnd_proto.c
//! `ksocknal_recv_hello_v2()`.

/// The byte order a peer revealed through its magic. ulnet itself always sends little-endian.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ByteOrder {
    /// The magic read as little-endian matched: every Lustre platform today.
    #[default]
    LittleEndian,
    /// The magic matched byte-swapped (`ksnc_flip` set): a big-endian sender.
    BigEndian,
}

impl ByteOrder {
    pub fn u16_from(self, bytes: [u8; 2]) -> u16 {
        match self {
            ByteOrder::LittleEndian => u16::from_le_bytes(bytes),
            ByteOrder::BigEndian => u16::from_be_bytes(bytes),
        }
    }

    pub fn u32_from(self, bytes: [u8; 4]) -> u32 {
        match self {
            ByteOrder::LittleEndian => u32::from_le_bytes(bytes),
            ByteOrder::BigEndian => u32::from_be_bytes(bytes),
        }
    }

    pub fn u64_from(self, bytes: [u8; 8]) -> u64 {
        match self {
            ByteOrder::LittleEndian => u64::from_le_bytes(bytes),
            ByteOrder::BigEndian => u64::from_be_bytes(bytes),
        }
    }

    pub fn u16_to(self, value: u16) -> [u8; 2] {
        match self {
            ByteOrder::LittleEndian => value.to_le_bytes(),
            ByteOrder::BigEndian => value.to_be_bytes(),
        }
    }

    pub fn u32_to(self, value: u32) -> [u8; 4] {
        match self {
            ByteOrder::LittleEndian => value.to_le_bytes(),
            ByteOrder::BigEndian => value.to_be_bytes(),
        }
    }

    pub fn u64_to(self, value: u64) -> [u8; 8] {
        match self {
            ByteOrder::LittleEndian => value.to_le_bytes(),
            ByteOrder::BigEndian => value.to_be_bytes(),
        }
    }
}

/// Reads fixed-size fields from a slice; every read returns `None` past the end, which callers
/// turn into "need more bytes".
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    order: ByteOrder,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8], order: ByteOrder) -> Self {
        Self { buf, pos: 0, order }
    }

    pub(crate) fn at(buf: &'a [u8], pos: usize, order: ByteOrder) -> Self {
        Self { buf, pos, order }
    }

    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let end = self.pos.checked_add(N)?;
        let bytes: [u8; N] = self.buf.get(self.pos..end)?.try_into().ok()?;
        self.pos = end;
        Some(bytes)
    }

    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.array().map(|b| self.order.u32_from(b))
    }

    pub(crate) fn u64(&mut self) -> Option<u64> {
        self.array().map(|b| self.order.u64_from(b))
    }

    pub(crate) fn skip(&mut self, len: usize) -> Option<()> {
        let end = self.pos.checked_add(len)?;
        if end > self.buf.len() {
            return None;
        }
        self.pos = end;
        Some(())
    }
}

/// Writes fields sequentially into a buffer whose length the caller has already checked
/// against the total it will write; a write past the end is dropped rather than panicking.
pub(crate) struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
    order: ByteOrder,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(buf: &'a mut [u8], order: ByteOrder) -> Self {
        Self { buf, pos: 0, order }
    }

    pub(crate) fn bytes(&mut self, bytes: &[u8]) {
        let end = self.pos.saturating_add(bytes.len());
        if let Some(dst) = self.buf.get_mut(self.pos..end) {
            dst.copy_from_slice(bytes);
        }
        self.pos = end;
    }

    pub(crate) fn zeros(&mut self, len: usize) {
        let end = self.pos.saturating_add(len);
        if let Some(dst) = self.buf.get_mut(self.pos..end) {
            dst.fill(0);
        }
        self.pos = end;
    }

    pub(crate) fn u16(&mut self, value: u16) {
        self.bytes(&self.order.u16_to(value));
    }

    pub(crate) fn u32(&mut self, value: u32) {
        self.bytes(&self.order.u32_to(value));
    }

    pub(crate) fn u64(&mut self, value: u64) {
        self.bytes(&self.order.u64_to(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_stops_at_the_end() {
        let mut reader = Reader::new(&[1, 0, 0, 0, 2], ByteOrder::LittleEndian);
        assert_eq!(reader.u32(), Some(1));
        assert_eq!(reader.u32(), None);
        assert_eq!(reader.position(), 4);
        let mut reader = Reader::new(&[0, 0, 0, 1], ByteOrder::BigEndian);
        assert_eq!(reader.u32(), Some(1));
    }

    #[test]
    fn writer_drops_writes_past_the_end() {
        let mut buf = [0u8; 6];
        let mut writer = Writer::new(&mut buf, ByteOrder::LittleEndian);
        writer.u32(0x0403_0201);
        writer.u32(0x0807_0605);
        assert_eq!(buf, [1, 2, 3, 4, 0, 0]);
    }
}
