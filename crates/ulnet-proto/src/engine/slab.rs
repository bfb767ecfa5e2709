//! A generational slab: dense storage with stable keys that detect reuse.
//!
//! Every object the engine hands out a handle for (MDs, MEs, messages) lives in one of these;
//! it is public for users with the same need (the selftest RPC layer names its MDs' events with
//! keys from one, as [`Key::to_u64`] values in their `user_ptr`).
//! A key carries the slot's generation, so a handle kept past its object's removal resolves to
//! nothing instead of to whatever reused the slot, and we can tell "removed" from "never
//! existed". Free slots are reused LIFO, which keeps runs deterministic.

/// A key into a [`Slab`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

/// What a key refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyState {
    Live,
    /// The object existed and was removed.
    Removed,
    /// No object ever had this key.
    Unknown,
}

#[derive(Debug)]
enum Entry<T> {
    Occupied { generation: u32, value: T },
    Vacant { generation: u32 },
}

/// See the module documentation.
#[derive(Debug)]
pub struct Slab<T> {
    entries: Vec<Entry<T>>,
    free: Vec<u32>,
    len: usize,
}

impl Key {
    /// The key as one number (generation above index), for a `user_ptr`.
    pub fn to_u64(self) -> u64 {
        (u64::from(self.generation) << 32) | u64::from(self.index)
    }

    /// The key [`to_u64`](Self::to_u64) made.
    pub fn from_u64(value: u64) -> Self {
        Self { index: value as u32, generation: (value >> 32) as u32 }
    }
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Slab<T> {
    pub fn new() -> Self {
        Self { entries: Vec::new(), free: Vec::new(), len: 0 }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Stores `value`; `None` when the index space (u32) is exhausted.
    pub fn insert(&mut self, value: T) -> Option<Key> {
        if let Some(index) = self.free.pop() {
            let slot = self.entries.get_mut(index as usize)?;
            let generation = match slot {
                Entry::Vacant { generation } => *generation,
                // The free list only holds vacant slots.
                Entry::Occupied { .. } => return None,
            };
            *slot = Entry::Occupied { generation, value };
            self.len += 1;
            return Some(Key { index, generation });
        }
        let index = u32::try_from(self.entries.len()).ok()?;
        self.entries.push(Entry::Occupied { generation: 0, value });
        self.len += 1;
        Some(Key { index, generation: 0 })
    }

    pub fn get(&self, key: Key) -> Option<&T> {
        match self.entries.get(key.index as usize)? {
            Entry::Occupied { generation, value } if *generation == key.generation => Some(value),
            _ => None,
        }
    }

    pub fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        match self.entries.get_mut(key.index as usize)? {
            Entry::Occupied { generation, value } if *generation == key.generation => Some(value),
            _ => None,
        }
    }

    pub fn remove(&mut self, key: Key) -> Option<T> {
        let slot = self.entries.get_mut(key.index as usize)?;
        match slot {
            Entry::Occupied { generation, .. } if *generation == key.generation => {}
            _ => return None,
        }
        let next = Entry::Vacant { generation: key.generation.wrapping_add(1) };
        let Entry::Occupied { value, .. } = std::mem::replace(slot, next) else {
            return None;
        };
        self.free.push(key.index);
        self.len -= 1;
        Some(value)
    }

    /// [`remove`](Self::remove) for a caller that does not want the value: it is dropped where
    /// it lies instead of being moved out (entries can be hundreds of bytes). Returns whether
    /// the key was live.
    pub fn discard(&mut self, key: Key) -> bool {
        let Some(slot) = self.entries.get_mut(key.index as usize) else {
            return false;
        };
        match slot {
            Entry::Occupied { generation, .. } if *generation == key.generation => {}
            _ => return false,
        }
        *slot = Entry::Vacant { generation: key.generation.wrapping_add(1) };
        self.free.push(key.index);
        self.len -= 1;
        true
    }

    pub fn state(&self, key: Key) -> KeyState {
        match self.entries.get(key.index as usize) {
            None => KeyState::Unknown,
            Some(Entry::Occupied { generation, .. }) if *generation == key.generation => {
                KeyState::Live
            }
            Some(Entry::Occupied { generation, .. } | Entry::Vacant { generation }) => {
                if key.generation < *generation { KeyState::Removed } else { KeyState::Unknown }
            }
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (Key, &T)> {
        self.entries.iter().enumerate().filter_map(|(index, entry)| match entry {
            Entry::Occupied { generation, value } => {
                Some((Key { index: index as u32, generation: *generation }, value))
            }
            Entry::Vacant { .. } => None,
        })
    }

    /// The values in slot order, to change.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.entries.iter_mut().filter_map(|entry| match entry {
            Entry::Occupied { value, .. } => Some(value),
            Entry::Vacant { .. } => None,
        })
    }
}

/// How the keys of a [`PartSlab`] name their CPU partition: in the low bits of the
/// index, as few as the partition count needs (none for one partition). A handle cookie made
/// from such a key (index shifted above the 2 type bits) thus carries its partition right above
/// the type, where the kernel puts it. lustre: api-ni.c `lnet_res_lh_initialize()`,
/// lib-types.h `lnet_cpt_of_cookie()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KeyPartitions {
    count: u32,
    bits: u32,
}

impl KeyPartitions {
    /// Keys for `count` partitions (at least one).
    pub(crate) fn new(count: u32) -> Self {
        let count = count.max(1);
        Self { count, bits: u32::BITS - (count - 1).leading_zeros() }
    }

    #[cfg(test)]
    pub(crate) fn count(self) -> u32 {
        self.count
    }

    /// The partition `key` names, `None` when its bits name none of this node's.
    #[inline]
    pub(crate) fn of(self, key: Key) -> Option<u32> {
        let cpt = key.index & ((1 << self.bits) - 1);
        (cpt < self.count).then_some(cpt)
    }

    /// The highest slot index a partition's slab may use for keys to stay within
    /// `max_index`.
    pub(crate) fn max_slot(self, max_index: u32) -> u32 {
        max_index >> self.bits
    }

    #[inline]
    fn compose(self, cpt: u32, slot: Key) -> Key {
        Key { index: slot.index << self.bits | cpt, generation: slot.generation }
    }

    #[inline]
    fn split(self, key: Key) -> Option<(usize, Key)> {
        let cpt = self.of(key)?;
        Some((cpt as usize, Key { index: key.index >> self.bits, generation: key.generation }))
    }
}

/// One CPU partition's slab, whose keys name the partition ([`KeyPartitions`]): the kernel's
/// resource container of one CPT (`ln_md_containers[cpt]`, `ln_me_containers[cpt]`). A key
/// naming another partition resolves to nothing here; [`Shares`](crate::engine::shares::Shares)
/// finds the partition a key names among those a call holds.
#[derive(Debug)]
pub(crate) struct PartSlab<T> {
    slab: Slab<T>,
    cpt: u32,
    partitions: KeyPartitions,
    /// The highest slot this partition may use for its keys to stay within the maximum index
    /// (handle cookies have room for 30 bits).
    max_slot: u32,
    /// Whether a value was reached by key since the audit last took it (the engine's
    /// partition audit).
    #[cfg(test)]
    touched: std::cell::Cell<bool>,
}

impl<T> PartSlab<T> {
    /// Partition `cpt`'s slab, for keys up to `max_index`.
    pub(crate) fn new(cpt: u32, partitions: KeyPartitions, max_index: u32) -> Self {
        Self {
            slab: Slab::new(),
            cpt,
            partitions,
            max_slot: partitions.max_slot(max_index),
            #[cfg(test)]
            touched: std::cell::Cell::new(false),
        }
    }

    /// Marks this partition as reached (tests only; nothing otherwise).
    #[inline]
    fn touch(&self) {
        #[cfg(test)]
        self.touched.set(true);
    }

    /// Whether a value was reached by key since the audit last took it.
    #[cfg(test)]
    pub(crate) fn touched(&self) -> &std::cell::Cell<bool> {
        &self.touched
    }

    /// The slot `key` names here; `None` for a key of another partition.
    #[inline]
    fn slot(&self, key: Key) -> Option<Key> {
        self.touch();
        match self.partitions.split(key)? {
            (cpt, slot) if cpt == self.cpt as usize => Some(slot),
            _ => None,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.slab.len()
    }

    /// Stores `value`; `None` when this partition's slots would make keys above the maximum
    /// index.
    #[inline]
    pub(crate) fn insert(&mut self, value: T) -> Option<Key> {
        self.touch();
        let slot = self.slab.insert(value)?;
        if slot.index > self.max_slot {
            self.slab.discard(slot);
            return None;
        }
        Some(self.partitions.compose(self.cpt, slot))
    }

    #[inline]
    pub(crate) fn get(&self, key: Key) -> Option<&T> {
        self.slab.get(self.slot(key)?)
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        let slot = self.slot(key)?;
        self.slab.get_mut(slot)
    }

    #[inline]
    pub(crate) fn remove(&mut self, key: Key) -> Option<T> {
        let slot = self.slot(key)?;
        self.slab.remove(slot)
    }

    /// Drops the value in place ([`Slab::discard`]); whether the key was live.
    #[inline]
    pub(crate) fn discard(&mut self, key: Key) -> bool {
        self.slot(key).is_some_and(|slot| self.slab.discard(slot))
    }

    #[inline]
    pub(crate) fn state(&self, key: Key) -> KeyState {
        self.slot(key).map_or(KeyState::Unknown, |slot| self.slab.state(slot))
    }

    /// The values in slot order, to change (all of them: marks the partition reached).
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.touch();
        self.slab.iter_mut()
    }

    /// The values in slot order, with their keys.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Key, &T)> {
        let (partitions, cpt) = (self.partitions, self.cpt);
        self.slab.iter().map(move |(slot, value)| (partitions.compose(cpt, slot), value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_detect_reuse() {
        let mut slab = Slab::new();
        let a = slab.insert("a").unwrap();
        assert_eq!(slab.get(a), Some(&"a"));
        assert_eq!(slab.remove(a), Some("a"));
        assert_eq!(slab.remove(a), None);
        let b = slab.insert("b").unwrap();
        assert_eq!(b.index, a.index);
        assert_eq!(slab.get(a), None);
        assert_eq!(slab.state(a), KeyState::Removed);
        assert_eq!(slab.state(b), KeyState::Live);
        assert_eq!(slab.state(Key { index: 9, generation: 0 }), KeyState::Unknown);
        assert_eq!(slab.state(Key { index: b.index, generation: 7 }), KeyState::Unknown);
        assert_eq!(slab.len(), 1);
        assert!(!slab.is_empty());
        assert_eq!(slab.iter().count(), 1);
        assert_eq!(Key::from_u64(b.to_u64()), b);
        assert_eq!(Key::from_u64(u64::MAX), Key { index: u32::MAX, generation: u32::MAX });
    }

    #[test]
    fn partitioned_keys_name_their_partition() {
        assert_eq!(KeyPartitions::new(1).bits, 0);
        assert_eq!(KeyPartitions::new(2).bits, 1);
        assert_eq!(KeyPartitions::new(3).bits, 2);
        assert_eq!(KeyPartitions::new(4).bits, 2);
        assert_eq!(KeyPartitions::new(5).bits, 3);
        let partitions = KeyPartitions::new(3);
        let mut two = PartSlab::new(2, partitions, (1 << 30) - 1);
        let mut zero = PartSlab::new(0, partitions, (1 << 30) - 1);
        let a = two.insert("a").unwrap();
        let b = zero.insert("b").unwrap();
        let c = two.insert("c").unwrap();
        assert_eq!((a.index, b.index, c.index), (2, 0, 1 << 2 | 2));
        assert_eq!([a, b, c].map(|key| partitions.of(key)), [Some(2), Some(0), Some(2)]);
        assert_eq!((two.get(a), two.get(c), two.len(), zero.len()), (Some(&"a"), Some(&"c"), 2, 1));
        // A key of another partition resolves to nothing here.
        assert_eq!((zero.get(a), zero.state(a), two.get(b)), (None, KeyState::Unknown, None));
        let order: Vec<_> = two.iter().map(|(key, value)| (key, *value)).collect();
        assert_eq!(order, [(a, "a"), (c, "c")]);
        // Bits naming a partition the node lacks resolve to nothing.
        let foreign = Key { index: 3, generation: 0 };
        assert_eq!((two.get(foreign), two.state(foreign)), (None, KeyState::Unknown));
        assert_eq!(two.remove(a), Some("a"));
        assert_eq!(two.state(a), KeyState::Removed);
        assert!(two.discard(c) && !two.discard(c));
        assert_eq!(two.len(), 0);
        // The partition's slots stop where keys would pass the maximum index.
        let mut small = PartSlab::new(1, KeyPartitions::new(2), 5);
        let keys: Vec<_> = (0..4).map(|_| small.insert(())).collect();
        assert_eq!(keys.iter().filter(|key| key.is_some()).count(), 3);
        assert_eq!(small.len(), 3);
        assert!(keys.iter().flatten().all(|key| key.index <= 5));
    }
}
