//! The wire codecs' one byte cursor: the byte order a peer revealed and a bounds-checked
//! [`Reader`] and [`Writer`] in that order.
//!
//! The acceptor connreq, the socklnd hello, the ksock header, the ping buffer and the selftest
//! RPC messages are sent in the sender's host order; the receiver detects the order from a
//! magic and swaps (`ksnc_flip`, `lnet_swap_pinginfo()`, `sfw_unpack_message()`).
//! lustre: lnet/lnet/acceptor.c `lnet_accept()`, lnet/klnds/socklnd/socklnd_proto.c
//! `ksocknal_recv_hello_v2()`, lnet/lnet/api-ni.c `lnet_swap_pinginfo()`, lnet/selftest/framework.c
//! `sfw_unpack_message()`.

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
    /// The order whose `magic` reads as `magic_le` when read little-endian: `None` when it is
    /// neither the magic nor the magic byte-swapped.
    pub fn detect(magic_le: u32, magic: u32) -> Option<Self> {
        if magic_le == magic {
            Some(Self::LittleEndian)
        } else if magic_le == magic.swap_bytes() {
            Some(Self::BigEndian)
        } else {
            None
        }
    }

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
/// turn into "need more bytes" or a named error. Reads go in sequence from a position, or at an
/// absolute offset (`*_at`) without moving it. The `packed_*` reads serve layouts whose whole
/// length was checked before reading (a const-asserted C struct): they yield zero past the end,
/// which cannot happen there.
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

    pub(crate) fn u16(&mut self) -> Option<u16> {
        self.array().map(|b| self.order.u16_from(b))
    }

    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.array().map(|b| self.order.u32_from(b))
    }

    pub(crate) fn u64(&mut self) -> Option<u64> {
        self.array().map(|b| self.order.u64_from(b))
    }

    /// The `u32` at offset `at`, leaving the position where it is.
    pub(crate) fn u32_at(&self, at: usize) -> Option<u32> {
        Some(self.order.u32_from(*self.buf.get(at..)?.first_chunk()?))
    }

    /// The `u64` at offset `at`, leaving the position where it is.
    pub(crate) fn u64_at(&self, at: usize) -> Option<u64> {
        Some(self.order.u64_from(*self.buf.get(at..)?.first_chunk()?))
    }

    pub(crate) fn packed_array<const N: usize>(&mut self) -> [u8; N] {
        self.array().unwrap_or([0; N])
    }

    pub(crate) fn packed_u8(&mut self) -> u8 {
        let [byte] = self.packed_array();
        byte
    }

    pub(crate) fn packed_u16(&mut self) -> u16 {
        self.u16().unwrap_or(0)
    }

    pub(crate) fn packed_u32(&mut self) -> u32 {
        self.u32().unwrap_or(0)
    }

    pub(crate) fn packed_u64(&mut self) -> u64 {
        self.u64().unwrap_or(0)
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

    /// Bytes written (or skipped) so far, including any dropped past the end.
    pub(crate) fn position(&self) -> usize {
        self.pos
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

    pub(crate) fn u8(&mut self, value: u8) {
        self.bytes(&[value]);
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
    fn absolute_and_packed_reads() {
        let reader = Reader::new(&[0, 0, 0, 1, 0, 0, 0, 2], ByteOrder::BigEndian);
        assert_eq!((reader.u32_at(4), reader.u32_at(5), reader.position()), (Some(2), None, 0));
        assert_eq!(reader.u64_at(0), Some(0x1_0000_0002));
        let mut reader = Reader::new(&[7, 1, 0], ByteOrder::LittleEndian);
        assert_eq!((reader.packed_u8(), reader.packed_u16(), reader.packed_u32()), (7, 1, 0));
    }

    #[test]
    fn detect_reads_the_magic_either_way() {
        let detect = |magic_le| ByteOrder::detect(magic_le, 0x1234_5678);
        assert_eq!(detect(0x1234_5678), Some(ByteOrder::LittleEndian));
        assert_eq!(detect(0x7856_3412), Some(ByteOrder::BigEndian));
        assert_eq!(detect(0x1234_5679), None);
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
