//! MD memory: the buffers an MD owns, as up to [`MAX_SEGMENTS`] segments (iovec style).
//!
//! The MD owns its memory from attach/bind until the event that reports it unlinked, which hands
//! the [`Memory`] back. In between, drivers borrow slices of it: `&mut` slices to read a payload
//! straight off a socket, `&` slices for vectored writes. The core never copies payload except
//! for loopback, as lo.c does.
//!
//! Memory may also be one buffer shared by several MDs ([`Memory::shared`]): a source that many
//! sends read at once, such as a self-test's pattern. Writing into it (an MD that receives)
//! first gives that MD a copy of its own.
//!
//! A driver that writes a payload without the core lock holds its bytes by reference
//! ([`Memory::pin`], [`PinnedBytes`]): the buffer becomes reference-counted, with no copy, so
//! whatever happens to the MD meanwhile the bytes being written stay as they were. Writing into
//! a pinned buffer, or handing it back, while a write still holds it costs a copy; once the
//! write is done it costs nothing.

use std::sync::Arc;

use crate::engine::error::MemoryError;

/// `LNET_MAX_IOV`: most segments in one MD.
pub const MAX_SEGMENTS: usize = 256;

/// Longest MD: offsets and lengths are 32-bit on the wire.
pub const MAX_MD_LENGTH: usize = u32::MAX as usize;

/// The buffers of one MD.
#[derive(Clone, Debug, Default)]
pub struct Memory {
    segments: Segments,
    length: usize,
}

/// The segments of a [`Memory`]. Most memory is one buffer, kept without a list around it:
/// no allocation beyond the buffer itself on the per-message path. A list always has
/// other than one segment.
#[derive(Clone, Debug, Default)]
enum Segments {
    #[default]
    None,
    One(Vec<u8>),
    Many(Vec<Vec<u8>>),
    /// One buffer that other memories may share; copied on the first write.
    Shared(Arc<Vec<u8>>),
    /// This memory's own buffer, which writes in progress may hold too ([`Memory::pin`]):
    /// copied on a write only while they do.
    Pinned(Arc<Vec<u8>>),
}

/// Memories are equal when they hold the same bytes in the same segments, however shared.
impl PartialEq for Memory {
    fn eq(&self, other: &Self) -> bool {
        self.length == other.length && self.segments() == other.segments()
    }
}

impl Eq for Memory {}

/// Bytes of a [`Memory`] a driver holds while it writes them without the core lock
/// ([`Memory::pin`]): `buffer[start..end]`, unchanged whatever happens to the memory meanwhile.
#[derive(Clone, Debug)]
pub struct PinnedBytes {
    buffer: Arc<Vec<u8>>,
    start: usize,
    end: usize,
}

impl PinnedBytes {
    /// The bytes not yet consumed.
    pub fn as_slice(&self) -> &[u8] {
        self.buffer.get(self.start..self.end).unwrap_or(&[])
    }

    pub fn len(&self) -> usize {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Drops the first `count` bytes (all of them if `count` is larger).
    pub fn consume(&mut self, count: usize) {
        self.start = self.start.saturating_add(count).min(self.end);
    }
}

impl Memory {
    /// No memory at all.
    pub const EMPTY: Self = Self { segments: Segments::None, length: 0 };

    /// One contiguous buffer.
    pub fn new(buffer: Vec<u8>) -> Self {
        let length = buffer.len();
        Self { segments: Segments::One(buffer), length }
    }

    /// One buffer shared with other memories (a source many sends read): no copy is made
    /// unless this memory is written.
    pub fn shared(buffer: Arc<Vec<u8>>) -> Self {
        let length = buffer.len();
        Self { segments: Segments::Shared(buffer), length }
    }

    /// Whether this memory shares its buffer ([`Memory::shared`]); a write through it first
    /// makes the buffer its own.
    pub fn is_shared(&self) -> bool {
        matches!(self.segments, Segments::Shared(_))
    }

    /// `offset..offset + length` as bytes a driver may hold while it writes them without the
    /// core lock. A memory of one buffer becomes reference-counted (no copy; the first pin
    /// allocates the count); `None` for memory of several segments or a range out of bounds.
    pub fn pin(&mut self, offset: usize, length: usize) -> Option<PinnedBytes> {
        let end = offset.checked_add(length).filter(|end| *end <= self.length)?;
        if let Segments::One(buffer) = &mut self.segments {
            self.segments = Segments::Pinned(Arc::new(std::mem::take(buffer)));
        }
        match &self.segments {
            Segments::Shared(buffer) | Segments::Pinned(buffer) => {
                Some(PinnedBytes { buffer: Arc::clone(buffer), start: offset, end })
            }
            Segments::None | Segments::One(_) | Segments::Many(_) => None,
        }
    }

    /// A zero-length region (for 0-byte PUTs and GETs).
    pub fn empty() -> Self {
        Self::EMPTY
    }

    /// A region of several buffers, addressed as their concatenation.
    pub fn from_segments(mut segments: Vec<Vec<u8>>) -> Result<Self, MemoryError> {
        if segments.len() > MAX_SEGMENTS {
            return Err(MemoryError::TooManySegments(segments.len()));
        }
        let length = segments.iter().map(Vec::len).sum();
        let segments = match segments.len() {
            0 => Segments::None,
            1 => Segments::One(segments.pop().unwrap_or_default()),
            _ => Segments::Many(segments),
        };
        Ok(Self { segments, length })
    }

    pub fn len(&self) -> usize {
        self.length
    }

    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    pub fn segments(&self) -> &[Vec<u8>] {
        match &self.segments {
            Segments::None => &[],
            Segments::One(buffer) => std::slice::from_ref(buffer),
            Segments::Many(segments) => segments,
            Segments::Shared(buffer) | Segments::Pinned(buffer) => std::slice::from_ref(&**buffer),
        }
    }

    fn segments_mut(&mut self) -> &mut [Vec<u8>] {
        // A pinned buffer nobody else holds any more is written in place and stays pinned,
        // so the next pin costs no allocation. (No weak references are ever made, and with one
        // strong reference nobody else can make another.)
        let pinned_alone =
            matches!(&self.segments, Segments::Pinned(buffer) if Arc::strong_count(buffer) == 1);
        if !pinned_alone {
            if let Segments::Shared(buffer) | Segments::Pinned(buffer) = &mut self.segments {
                // Copy on write: the other holders keep what they read.
                let buffer = std::mem::take(Arc::make_mut(buffer));
                self.segments = Segments::One(buffer);
            }
        }
        match &mut self.segments {
            Segments::None | Segments::Shared(_) => &mut [],
            Segments::Pinned(buffer) => Arc::get_mut(buffer).map_or(&mut [], std::slice::from_mut),
            Segments::One(buffer) => std::slice::from_mut(buffer),
            Segments::Many(segments) => segments,
        }
    }

    /// The buffers, in order, handed back.
    pub fn into_segments(self) -> IntoSegments {
        IntoSegments(match self.segments {
            Segments::None => IntoSegmentsInner::Done,
            Segments::One(buffer) => IntoSegmentsInner::One(Some(buffer)),
            Segments::Many(segments) => IntoSegmentsInner::Many(segments.into_iter()),
            // A copy unless this was the last holder.
            Segments::Shared(buffer) | Segments::Pinned(buffer) => {
                IntoSegmentsInner::One(Some(Arc::unwrap_or_clone(buffer)))
            }
        })
    }

    /// The concatenated contents (a copy; for tests and small buffers).
    pub fn to_vec(&self) -> Vec<u8> {
        self.segments().concat()
    }

    /// Slices covering `offset..offset + length`, clipped to the region.
    pub fn slices(&self, offset: usize, length: usize) -> Slices<'_> {
        Slices { segments: self.segments().iter(), skip: offset, remaining: length }
    }

    /// Mutable slices covering `offset..offset + length`, clipped to the region.
    pub fn slices_mut(&mut self, offset: usize, length: usize) -> SlicesMut<'_> {
        SlicesMut { segments: self.segments_mut().iter_mut(), skip: offset, remaining: length }
    }

    /// Copies `bytes` in at `offset`; false (and nothing written) if it would not fit.
    pub fn write_at(&mut self, offset: usize, bytes: &[u8]) -> bool {
        if offset.checked_add(bytes.len()).is_none_or(|end| end > self.length) {
            return false;
        }
        let mut source = bytes;
        for slice in self.slices_mut(offset, bytes.len()) {
            let (head, rest) = source.split_at(slice.len().min(source.len()));
            // `head` is at most `slice.len()` long, so `get_mut` always finds room for it.
            if let Some(target) = slice.get_mut(..head.len()) {
                target.copy_from_slice(head);
            }
            source = rest;
        }
        true
    }

    /// Copies out `offset..offset + buffer.len()`; false if out of range.
    pub fn read_at(&self, offset: usize, buffer: &mut [u8]) -> bool {
        if offset.checked_add(buffer.len()).is_none_or(|end| end > self.length) {
            return false;
        }
        let mut target = buffer;
        for slice in self.slices(offset, target.len()) {
            let (head, rest) = target.split_at_mut(slice.len().min(target.len()));
            // `head` is at most `slice.len()` long, so `get` always finds all of it.
            if let Some(source) = slice.get(..head.len()) {
                head.copy_from_slice(source);
            }
            target = rest;
        }
        true
    }
}

/// A receive's destination lent to the driver ([`Engine::rx_lend`]): `length` bytes of
/// `memory` from `start`, which the driver fills without the core lock and then gives back
/// ([`Engine::rx_give_back`]).
///
/// [`Engine::rx_lend`]: crate::engine::Engine::rx_lend
/// [`Engine::rx_give_back`]: crate::engine::Engine::rx_give_back
#[derive(Debug)]
pub struct LentPayload {
    pub(crate) memory: Memory,
    pub(crate) start: usize,
    pub(crate) length: usize,
}

impl LentPayload {
    /// The receive's length.
    pub fn len(&self) -> usize {
        self.length
    }

    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// Mutable slices of the receive's bytes from `offset` (within the receive) to its end.
    pub fn slices_mut(&mut self, offset: usize) -> SlicesMut<'_> {
        let length = self.length.saturating_sub(offset);
        self.memory.slices_mut(self.start.saturating_add(offset), length)
    }

    /// Copies `bytes` in at `offset` within the receive; false (nothing written) if they do
    /// not fit.
    pub fn write_at(&mut self, offset: usize, bytes: &[u8]) -> bool {
        if offset.checked_add(bytes.len()).is_none_or(|end| end > self.length) {
            return false;
        }
        self.memory.write_at(self.start + offset, bytes)
    }
}

/// Copies `length` bytes from `source` at `source_offset` to `target` at `target_offset`
/// (the loopback LND's one copy; lustre: lnet/lnet/lo.c `lolnd_recv()`). Returns false if a
/// range is out of bounds.
pub(crate) fn copy_between(
    source: &Memory,
    source_offset: usize,
    target: &mut Memory,
    target_offset: usize,
    length: usize,
) -> bool {
    if source_offset.checked_add(length).is_none_or(|end| end > source.len())
        || target_offset.checked_add(length).is_none_or(|end| end > target.len())
    {
        return false;
    }
    let mut position = target_offset;
    for slice in source.slices(source_offset, length) {
        target.write_at(position, slice);
        position += slice.len();
    }
    true
}

/// The buffers of a [`Memory`], handed back ([`Memory::into_segments`]).
#[derive(Debug)]
pub struct IntoSegments(IntoSegmentsInner);

#[derive(Debug)]
enum IntoSegmentsInner {
    Done,
    One(Option<Vec<u8>>),
    Many(std::vec::IntoIter<Vec<u8>>),
}

impl Iterator for IntoSegments {
    type Item = Vec<u8>;

    fn next(&mut self) -> Option<Vec<u8>> {
        match &mut self.0 {
            IntoSegmentsInner::Done => None,
            IntoSegmentsInner::One(buffer) => buffer.take(),
            IntoSegmentsInner::Many(segments) => segments.next(),
        }
    }
}

/// Iterator over shared slices of a [`Memory`] range.
#[derive(Debug)]
pub struct Slices<'a> {
    segments: std::slice::Iter<'a, Vec<u8>>,
    skip: usize,
    remaining: usize,
}

impl<'a> Iterator for Slices<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        while self.remaining > 0 {
            let segment = self.segments.next()?;
            if self.skip >= segment.len() {
                self.skip -= segment.len();
                continue;
            }
            let start = std::mem::take(&mut self.skip);
            let take = (segment.len() - start).min(self.remaining);
            self.remaining -= take;
            return segment.get(start..start + take);
        }
        None
    }
}

/// Iterator over mutable slices of a [`Memory`] range.
#[derive(Debug)]
pub struct SlicesMut<'a> {
    segments: std::slice::IterMut<'a, Vec<u8>>,
    skip: usize,
    remaining: usize,
}

impl<'a> Iterator for SlicesMut<'a> {
    type Item = &'a mut [u8];

    fn next(&mut self) -> Option<&'a mut [u8]> {
        while self.remaining > 0 {
            let segment = self.segments.next()?;
            if self.skip >= segment.len() {
                self.skip -= segment.len();
                continue;
            }
            let start = std::mem::take(&mut self.skip);
            let take = (segment.len() - start).min(self.remaining);
            self.remaining -= take;
            return segment.get_mut(start..start + take);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three_segments() -> Memory {
        Memory::from_segments(vec![vec![0; 3], vec![], vec![0; 4], vec![0; 2]]).unwrap()
    }

    #[test]
    fn shared_memory_is_read_in_place_and_copied_on_write() {
        let source = Arc::new(vec![1u8, 2, 3, 4, 5]);
        let first = Memory::shared(Arc::clone(&source));
        let mut second = Memory::shared(Arc::clone(&source));
        assert!(first.is_shared() && second.is_shared());
        assert_eq!(first.len(), 5);
        let mut read = [0u8; 3];
        assert!(first.read_at(1, &mut read));
        assert_eq!(read, [2, 3, 4]);
        assert_eq!(first.slices(0, 5).next().map(<[u8]>::as_ptr), Some(source.as_ptr()));
        // Three sharers, no copy yet.
        assert_eq!(Arc::strong_count(&source), 3);

        assert!(second.write_at(0, &[9, 9]));
        assert_eq!(second.to_vec(), [9, 9, 3, 4, 5]);
        assert_eq!(first.to_vec(), [1, 2, 3, 4, 5]);
        assert_eq!(*source, [1, 2, 3, 4, 5]);
        assert_eq!(Arc::strong_count(&source), 2, "the writer has its own copy now");
        assert!(!second.is_shared() && first.is_shared());

        drop(source);
        // The last sharer gets the buffer back without a copy.
        let pointer = first.segments()[0].as_ptr();
        let back: Vec<Vec<u8>> = first.into_segments().collect();
        assert_eq!(back, [vec![1, 2, 3, 4, 5]]);
        assert_eq!(back[0].as_ptr(), pointer);
    }

    #[test]
    fn pinned_bytes_outlive_writes_and_cost_a_copy_only_while_held() {
        let mut memory = Memory::new(vec![1, 2, 3, 4, 5]);
        let pointer = memory.segments()[0].as_ptr();
        let mut pinned = memory.pin(1, 3).expect("one buffer pins");
        assert!(!memory.is_shared(), "a pinned buffer is still the memory's own");
        assert_eq!(pinned.as_slice(), [2, 3, 4]);
        assert_eq!(pinned.as_slice().as_ptr(), pointer.wrapping_add(1), "no copy");
        assert_eq!(memory, Memory::new(vec![1, 2, 3, 4, 5]));

        // A write while the bytes are held copies; the held bytes stay as they were.
        assert!(memory.write_at(2, &[9]));
        assert_eq!(pinned.as_slice(), [2, 3, 4]);
        assert_eq!(memory.to_vec(), [1, 2, 9, 4, 5]);
        pinned.consume(2);
        assert_eq!(pinned.as_slice(), [4]);
        pinned.consume(10);
        assert!(pinned.is_empty());

        // Once nobody holds them, writing and handing back are free.
        let again = memory.pin(0, 5).expect("pins again");
        let pointer = again.as_slice().as_ptr();
        drop(again);
        assert!(memory.write_at(0, &[7]));
        assert_eq!(memory.segments()[0].as_ptr(), pointer);
        let back: Vec<Vec<u8>> = memory.into_segments().collect();
        assert_eq!(back[0].as_ptr(), pointer);
        assert_eq!(back, [vec![7, 2, 9, 4, 5]]);

        assert!(Memory::new(vec![0; 4]).pin(2, 3).is_none(), "out of range");
        assert!(three_segments().pin(0, 1).is_none(), "several segments do not pin");
        let shared = Arc::new(vec![5u8; 8]);
        let pinned = Memory::shared(Arc::clone(&shared)).pin(0, 8).expect("shared pins");
        assert_eq!(pinned.as_slice().as_ptr(), shared.as_ptr());
    }

    #[test]
    fn slices_span_segments() {
        let mut memory = three_segments();
        assert_eq!(memory.len(), 9);
        assert!(memory.write_at(1, &[1, 2, 3, 4, 5, 6]));
        assert_eq!(memory.to_vec(), [0, 1, 2, 3, 4, 5, 6, 0, 0]);
        let lengths: Vec<usize> = memory.slices(2, 5).map(<[u8]>::len).collect();
        assert_eq!(lengths, [1, 4]);
        let mut out = [0u8; 4];
        assert!(memory.read_at(3, &mut out));
        assert_eq!(out, [3, 4, 5, 6]);
        assert!(!memory.write_at(8, &[1, 2]));
        assert!(!memory.read_at(usize::MAX, &mut out));
        assert_eq!(memory.slices(20, 5).count(), 0);
    }

    #[test]
    fn segments_come_back_as_they_went() {
        for sizes in [vec![], vec![0], vec![3], vec![2, 0, 5]] {
            let buffers: Vec<Vec<u8>> = sizes.iter().map(|n| vec![7; *n]).collect();
            let memory = Memory::from_segments(buffers.clone()).unwrap();
            assert_eq!(memory.segments(), buffers.as_slice());
            assert_eq!(memory.len(), sizes.iter().sum::<usize>());
            assert_eq!(memory.into_segments().collect::<Vec<_>>(), buffers);
        }
        assert_eq!(Memory::new(vec![1, 2]), Memory::from_segments(vec![vec![1, 2]]).unwrap());
        assert_eq!(Memory::empty(), Memory::from_segments(Vec::new()).unwrap());
        assert_eq!(Memory::EMPTY.segments().len(), 0);
    }

    #[test]
    fn too_many_segments_is_refused() {
        let segments = vec![Vec::new(); MAX_SEGMENTS + 1];
        assert_eq!(Memory::from_segments(segments), Err(MemoryError::TooManySegments(257)));
        assert!(Memory::from_segments(vec![Vec::new(); MAX_SEGMENTS]).is_ok());
    }

    #[test]
    fn copy_between_regions() {
        let source = Memory::new(vec![9, 8, 7, 6]);
        let mut target = three_segments();
        assert!(copy_between(&source, 1, &mut target, 2, 3));
        assert_eq!(target.to_vec(), [0, 0, 8, 7, 6, 0, 0, 0, 0]);
        assert!(!copy_between(&source, 2, &mut target, 0, 3));
    }

    proptest::proptest! {
        #[test]
        fn write_then_read_round_trips(
            sizes in proptest::collection::vec(0usize..8, 0..6),
            offset in 0usize..40,
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..40),
        ) {
            let mut memory = Memory::from_segments(sizes.iter().map(|n| vec![0; *n]).collect()).unwrap();
            let fits = offset + bytes.len() <= memory.len();
            proptest::prop_assert_eq!(memory.write_at(offset, &bytes), fits);
            if fits {
                let mut out = vec![0; bytes.len()];
                proptest::prop_assert!(memory.read_at(offset, &mut out));
                proptest::prop_assert_eq!(out, bytes);
            }
        }
    }
}
