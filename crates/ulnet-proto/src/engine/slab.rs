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
}
