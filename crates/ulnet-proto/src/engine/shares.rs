//! The partitions' shares of a partitioned part that one call holds, by partition.
//!
//! A part kept per CPU partition (messages, MDs, MEs: `P`, one partition's share) is reached
//! through a [`Shares`] in a view: the engine alone gives a call every partition's share, a
//! runtime that locks partitions apart only those of the partitions it locked (decision 0029).
//! A key names its partition ([`KeyPartitions`]), so finding what it names costs a comparison
//! when the call holds that one partition, its usual case.

use crate::engine::slab::{Key, KeyPartitions, KeyState, PartSlab};
use crate::engine::view::{Access, Exclusive, Shared};

/// The shares of a partitioned part a call holds, each with its partition, in the order
/// given (partition order, so iteration is deterministic). A view is built for every call, so
/// this is kept small: the first share inline, any others (a call planned on several
/// partitions, or the engine's view of all of them) boxed.
pub(crate) struct Shares<'a, A: Access, P: 'a> {
    partitions: KeyPartitions,
    first_cpt: u32,
    first: A::Ref<'a, P>,
    more: Option<Box<MoreShares<'a, A, P>>>,
}

/// The shares a call holds beyond its first, each with its partition.
type MoreShares<'a, A, P> = Vec<(u32, <A as Access>::Ref<'a, P>)>;

impl<'a, A: Access, P: 'a> Shares<'a, A, P> {
    /// Partition `cpt`'s share alone.
    #[inline]
    pub(crate) fn one(partitions: KeyPartitions, cpt: u32, share: A::Ref<'a, P>) -> Self {
        Self { partitions, first_cpt: cpt, first: share, more: None }
    }

    /// Adds partition `cpt`'s share.
    pub(crate) fn hold(&mut self, cpt: u32, share: A::Ref<'a, P>) {
        self.more.get_or_insert_with(Box::default).push((cpt, share));
    }

    /// Partition `cpt`'s share, when the call holds it.
    #[inline]
    pub(crate) fn share(&self, cpt: u32) -> Option<&P> {
        if cpt == self.first_cpt {
            return Some(&self.first);
        }
        let more = self.more.as_deref()?;
        more.iter().find(|(held, _)| *held == cpt).map(|(_, share)| &**share)
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

    /// The shares of the partitions of `held` (one bit each) among those held, to read:
    /// what a call holding only those partitions would see. `None` when it holds none of
    /// them.
    pub(crate) fn narrow(&self, held: u64) -> Option<Shares<'_, Shared, P>> {
        let mut shares = self.iter_shares().filter(|(cpt, _)| *cpt < 64 && held & 1 << cpt != 0);
        let (cpt, first) = shares.next()?;
        let mut narrowed = Shares::one(self.partitions, cpt, first);
        shares.for_each(|(cpt, share)| narrowed.hold(cpt, share));
        Some(narrowed)
    }

    /// The shares held, with their partitions.
    pub(crate) fn iter_shares(&self) -> impl Iterator<Item = (u32, &P)> {
        let more = self.more.as_deref().into_iter().flatten();
        let more = more.map(|(cpt, share)| (*cpt, &**share));
        std::iter::once((self.first_cpt, &*self.first)).chain(more)
    }
}

impl<'a, P: 'a> Shares<'a, Exclusive, P> {
    /// Partition `cpt`'s share, to change, when the call holds it.
    #[inline]
    pub(crate) fn share_mut(&mut self, cpt: u32) -> Option<&mut P> {
        if cpt == self.first_cpt {
            return Some(self.first);
        }
        let more = self.more.as_deref_mut()?;
        more.iter_mut().find(|(held, _)| *held == cpt).map(|(_, share)| &mut **share)
    }

    /// The shares held, with their partitions, to change.
    pub(crate) fn iter_shares_mut(&mut self) -> impl Iterator<Item = (u32, &mut P)> {
        let more = self.more.as_deref_mut().into_iter().flatten();
        let more = more.map(|(cpt, share)| (*cpt, &mut **share));
        std::iter::once((self.first_cpt, &mut *self.first)).chain(more)
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
        let share = if cpt == self.first_cpt {
            self.first
        } else {
            let more = self.more?;
            more.into_iter().find(|(held, _)| *held == cpt)?.1
        };
        share.slab_mut().get_mut(key)
    }
}

impl<'a, P: 'a> Shares<'a, Exclusive, P> {
    /// These shares, to read for as long as the view's borrow lasts.
    pub(crate) fn into_shared(self) -> Shares<'a, Shared, P> {
        let more = self.more.map(|more| {
            Box::new(more.into_iter().map(|(cpt, share)| (cpt, &*share)).collect::<Vec<_>>())
        });
        Shares { partitions: self.partitions, first_cpt: self.first_cpt, first: self.first, more }
    }
}

impl<'a, P: Keyed + 'a> Shares<'a, Shared, P> {
    /// The value `key` names, for as long as the view's borrow lasts.
    pub(crate) fn get_for_view(&self, key: Key) -> Option<&'a P::Value> {
        let cpt = self.partitions.of(key)?;
        let share: &'a P = if cpt == self.first_cpt {
            self.first
        } else {
            self.more.as_deref()?.iter().find(|(held, _)| *held == cpt)?.1
        };
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
        let (first, rest) = self.shares.split_first().expect("one share at least");
        let mut shares = Shares::one(self.partitions, 0, first);
        (1u32..).zip(rest).for_each(|(cpt, share)| shares.hold(cpt, share));
        shares
    }

    pub(crate) fn exclusive(&mut self) -> Shares<'_, Exclusive, P> {
        let (first, rest) = self.shares.split_first_mut().expect("one share at least");
        let mut shares = Shares::one(self.partitions, 0, first);
        (1u32..).zip(rest).for_each(|(cpt, share)| shares.hold(cpt, share));
        shares
    }
}
