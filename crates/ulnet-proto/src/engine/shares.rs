//! The partitions' shares of a partitioned part that one call holds, by partition.
//!
//! A part kept per CPU partition (messages, MDs, MEs: `P`, one partition's share) is reached
//! through a [`Shares`] in a view: the engine alone gives a call every partition's share, a
//! runtime that locks partitions apart only those of the partitions it locked (decision 0029).
//! A key names its partition ([`KeyPartitions`]), so finding what it names costs a comparison
//! or two: a call holds one partition's share or two, kept inline.

use crate::engine::slab::{Key, KeyPartitions, KeyState, PartSlab};
use crate::engine::view::{Access, Exclusive, Shared};

/// The shares held inline; a call holding more keeps the rest in a `Vec`.
const INLINE: usize = 2;

/// The shares of a partitioned part a call holds, each with its partition, in the order
/// given (partition order, so iteration is deterministic).
pub(crate) struct Shares<'a, A: Access, P: 'a> {
    partitions: KeyPartitions,
    inline: [Option<(u32, A::Ref<'a, P>)>; INLINE],
    more: Vec<(u32, A::Ref<'a, P>)>,
}

impl<'a, A: Access, P: 'a> Shares<'a, A, P> {
    pub(crate) fn new(partitions: KeyPartitions) -> Self {
        Self { partitions, inline: [None, None], more: Vec::new() }
    }

    /// Adds partition `cpt`'s share.
    pub(crate) fn hold(&mut self, cpt: u32, share: A::Ref<'a, P>) {
        match self.inline.iter_mut().find(|slot| slot.is_none()) {
            Some(slot) => *slot = Some((cpt, share)),
            None => self.more.push((cpt, share)),
        }
    }

    /// Partition `cpt`'s share, when the call holds it.
    #[inline]
    pub(crate) fn share(&self, cpt: u32) -> Option<&P> {
        let found = self.inline.iter().flatten().find(|(held, _)| *held == cpt);
        match found {
            Some((_, share)) => Some(share),
            None => self.more.iter().find(|(held, _)| *held == cpt).map(|(_, share)| &**share),
        }
    }

    /// The share of the partition `key` names.
    #[inline]
    pub(crate) fn share_of(&self, key: Key) -> Option<&P> {
        self.share(self.partitions.of(key)?)
    }

    /// The partition `key` names.
    pub(crate) fn partition_of(&self, key: Key) -> Option<u32> {
        self.partitions.of(key)
    }

    /// The shares held, with their partitions.
    pub(crate) fn iter_shares(&self) -> impl Iterator<Item = (u32, &P)> {
        let inline = self.inline.iter().flatten();
        inline.chain(&self.more).map(|(cpt, share)| (*cpt, &**share))
    }
}

impl<'a, P: 'a> Shares<'a, Exclusive, P> {
    /// Partition `cpt`'s share, to change, when the call holds it.
    #[inline]
    pub(crate) fn share_mut(&mut self, cpt: u32) -> Option<&mut P> {
        let found = self.inline.iter_mut().flatten().find(|(held, _)| *held == cpt);
        match found {
            Some((_, share)) => Some(share),
            None => {
                let mut more = self.more.iter_mut();
                more.find(|(held, _)| *held == cpt).map(|(_, share)| &mut **share)
            }
        }
    }

    /// The shares held, with their partitions, to change.
    pub(crate) fn iter_shares_mut(&mut self) -> impl Iterator<Item = (u32, &mut P)> {
        let inline = self.inline.iter_mut().flatten();
        inline.chain(&mut self.more).map(|(cpt, share)| (*cpt, &mut **share))
    }

    /// The share of the partition `key` names, to change.
    #[inline]
    pub(crate) fn share_of_mut(&mut self, key: Key) -> Option<&mut P> {
        let cpt = self.partitions.of(key)?;
        self.share_mut(cpt)
    }
}

/// A partition's share that stores keyed values in a [`PartSlab`].
pub(crate) trait Keyed {
    type Value;
    fn slab(&self) -> &PartSlab<Self::Value>;
    fn slab_mut(&mut self) -> &mut PartSlab<Self::Value>;
}

impl<'a, A: Access, P: Keyed + 'a> Shares<'a, A, P> {
    #[inline]
    pub(crate) fn get(&self, key: Key) -> Option<&P::Value> {
        self.share_of(key)?.slab().get(key)
    }

    #[inline]
    pub(crate) fn state(&self, key: Key) -> KeyState {
        self.share_of(key).map_or(KeyState::Unknown, |share| share.slab().state(key))
    }

    /// Every value held, partition by partition, each in slot order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Key, &P::Value)> {
        self.iter_shares().flat_map(|(_, share)| share.slab().iter())
    }

    /// How many values each partition held holds, in partition order.
    pub(crate) fn count_by_partition(&self) -> Vec<usize> {
        self.iter_shares().map(|(_, share)| share.slab().len()).collect()
    }

    /// Whether a value was reached by key in each partition held since the audit last took
    /// it, one bit each.
    #[cfg(test)]
    pub(crate) fn take_touched(&self) -> u64 {
        self.iter_shares()
            .filter(|(_, share)| share.slab().touched().take())
            .fold(0, |bits, (cpt, _)| bits | 1 << cpt.min(63))
    }
}

impl<'a, P: Keyed + 'a> Shares<'a, Exclusive, P> {
    #[inline]
    pub(crate) fn get_mut(&mut self, key: Key) -> Option<&mut P::Value> {
        self.share_of_mut(key)?.slab_mut().get_mut(key)
    }

    /// The value `key` names, to change for as long as the view's borrow lasts (the view's
    /// shares are given up for it).
    pub(crate) fn into_mut(self, key: Key) -> Option<&'a mut P::Value> {
        let cpt = self.partitions.of(key)?;
        let mut held = self.inline.into_iter().flatten().chain(self.more);
        let (_, share) = held.find(|(held, _)| *held == cpt)?;
        share.slab_mut().get_mut(key)
    }
}

impl<'a, P: Keyed + 'a> Shares<'a, Shared, P> {
    /// The value `key` names, for as long as the view's borrow lasts.
    pub(crate) fn get_for_view(&self, key: Key) -> Option<&'a P::Value> {
        let cpt = self.partitions.of(key)?;
        let mut held = self.inline.iter().flatten().chain(&self.more);
        let (_, share) = held.find(|(held, _)| *held == cpt)?;
        let share: &'a P = share;
        share.slab().get(key)
    }
}

/// Every partition's share, owned: what a test builds views of.
#[cfg(test)]
pub(crate) struct Owned<P> {
    partitions: KeyPartitions,
    shares: Vec<P>,
}

#[cfg(test)]
impl<P> Owned<P> {
    /// A share for each of `partitions`, made by `make(cpt, partitions)`.
    pub(crate) fn new(partitions: KeyPartitions, make: fn(u32, KeyPartitions) -> P) -> Self {
        Self {
            partitions,
            shares: (0..partitions.count()).map(|cpt| make(cpt, partitions)).collect(),
        }
    }

    pub(crate) fn shared(&self) -> Shares<'_, Shared, P> {
        let mut shares = Shares::new(self.partitions);
        (0u32..).zip(&self.shares).for_each(|(cpt, share)| shares.hold(cpt, share));
        shares
    }

    pub(crate) fn exclusive(&mut self) -> Shares<'_, Exclusive, P> {
        let mut shares = Shares::new(self.partitions);
        (0u32..).zip(&mut self.shares).for_each(|(cpt, share)| shares.hold(cpt, share));
        shares
    }
}
