//! The portal table (`Portals`): per-portal ME lists, match type, lazy queue, and matching.
//!
//! lustre: lnet/lnet/lib-ptl.c (`lnet_ptl_match_type`, `lnet_mt_match_md`, `lnet_try_match_md`,
//! `lnet_ptl_attach_md`, `lnet_ptl_match_delay`), docs/protocol/semantics.md §1.1, §1.2, §1.6.
//!
//! Lustre hashes MEs into buckets; the observable order is "MEs with ignore bits first, in
//! insertion order, then the MEs whose exact bits equal the incoming bits, in insertion order".
//! We keep exactly those two sequences: one ordered list of ignore-bit MEs and, for exact MEs,
//! an ordered list per match-bits value.

use std::collections::VecDeque;

use foldhash::HashMap;
use std::collections::hash_map::Entry;

use crate::engine::md::{Md, MdOptions, Mds};
use crate::engine::me::{InsertPosition, Me, Mes, ProcessId};
use crate::engine::slab::Key;

/// `MAX_PORTALS`.
pub const MAX_PORTALS: u32 = 64;

/// `LNET_RESERVED_PORTAL`: LNet's own portal (ping and push targets).
pub const RESERVED_PORTAL: u32 = 0;

/// A portal's match type, fixed by the first ME ever attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchType {
    /// Specific NID and pid, no ignore bits.
    Unique,
    Wildcard,
}

/// What the incoming message asks for (`struct lnet_match_info`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct MatchInfo {
    pub(crate) initiator: ProcessId,
    pub(crate) operation: MdOptions,
    pub(crate) match_bits: u64,
    pub(crate) remote_offset: u32,
    pub(crate) rlength: u32,
}

/// Result of matching against one MD (`LNET_MATCHMD_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MdMatch {
    /// Not this ME/MD; keep looking.
    None,
    /// Matched but too big without TRUNCATE: drop, and stop looking.
    TooBig,
    /// Matched: the message owns `mlength` bytes at `offset`.
    Ok { offset: u32, mlength: u32 },
}

/// Result of matching against a whole portal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PortalMatch {
    Ok {
        me: Key,
        md: Key,
        offset: u32,
        mlength: u32,
    },
    /// Drop the message (no match on a non-lazy portal, a GET, or too big).
    Drop(DropReason),
    /// Lazy portal, no buffer yet: delay the PUT.
    Delay,
}

/// Why an incoming PUT or GET was dropped (for statistics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    BadPortal,
    NoMatch,
    TooBig,
    LazyQueueFull,
}

/// The portal table: [`MAX_PORTALS`] portals, indexed by portal number.
#[derive(Debug)]
pub(crate) struct Portals {
    table: Vec<Portal>,
}

impl Portals {
    pub(crate) fn new() -> Self {
        Self { table: (0..MAX_PORTALS).map(|_| Portal::default()).collect() }
    }

    #[inline]
    pub(crate) fn get(&self, index: usize) -> Option<&Portal> {
        self.table.get(index)
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, index: usize) -> Option<&mut Portal> {
        self.table.get_mut(index)
    }

    pub(crate) fn iter(&self) -> std::slice::Iter<'_, Portal> {
        self.table.iter()
    }
}

#[derive(Debug, Default)]
pub(crate) struct Portal {
    pub(crate) match_type: Option<MatchType>,
    pub(crate) lazy: bool,
    ignore: VecDeque<Key>,
    exact: HashMap<u64, ExactList>,
    /// Delayed PUTs on a lazy portal, FIFO (`ptl_msg_delayed`).
    pub(crate) delayed: VecDeque<Key>,
    entries: usize,
}

impl Portal {
    /// Checks (and on first use fixes) the match type for a new ME; false is Lustre's -EPERM.
    pub(crate) fn accepts(&mut self, me: &Me) -> bool {
        let wanted = if me.is_unique() { MatchType::Unique } else { MatchType::Wildcard };
        *self.match_type.get_or_insert(wanted) == wanted
    }

    pub(crate) fn insert(&mut self, key: Key, me: &Me, position: InsertPosition) {
        if me.ignore_bits != 0 {
            match position {
                InsertPosition::Before => self.ignore.push_front(key),
                InsertPosition::After => self.ignore.push_back(key),
            }
        } else {
            match self.exact.entry(me.match_bits) {
                Entry::Vacant(vacant) => {
                    vacant.insert(ExactList::One(key));
                }
                Entry::Occupied(mut list) => list.get_mut().insert(key, position),
            }
        }
        self.entries += 1;
    }

    pub(crate) fn remove(&mut self, key: Key, me: &Me) {
        let removed = if me.ignore_bits != 0 {
            remove_key(&mut self.ignore, key)
        } else {
            match self.exact.entry(me.match_bits) {
                Entry::Vacant(_) => false,
                Entry::Occupied(mut list) => match list.get_mut() {
                    ExactList::One(only) if *only == key => {
                        list.remove();
                        true
                    }
                    ExactList::One(_) => false,
                    ExactList::Many(keys) => {
                        let removed = remove_key(keys, key);
                        if keys.is_empty() {
                            list.remove();
                        }
                        removed
                    }
                },
            }
        };
        if removed {
            self.entries -= 1;
        }
    }

    pub(crate) fn entries(&self) -> usize {
        self.entries
    }

    /// `lnet_mt_match_md` + `lnet_ptl_match_md`: search this portal for a buffer.
    pub(crate) fn match_md(&self, mes: &Mes, mds: &mut Mds, info: &MatchInfo) -> PortalMatch {
        let exact = self.exact.get(&info.match_bits).map(ExactList::as_slices);
        let (first, second) = exact.unwrap_or_default();
        for &me_key in self.ignore.iter().chain(first).chain(second) {
            let Some(me) = mes.get(me_key) else { continue };
            let Some(md_key) = me.md else { continue };
            let Some(md) = mds.get_mut(md_key) else {
                continue;
            };
            match try_match_md(me, md, info) {
                MdMatch::None => {}
                MdMatch::TooBig => return PortalMatch::Drop(DropReason::TooBig),
                MdMatch::Ok { offset, mlength } => {
                    return PortalMatch::Ok { me: me_key, md: md_key, offset, mlength };
                }
            }
        }
        if info.operation == MdOptions::OP_GET || !self.lazy {
            PortalMatch::Drop(DropReason::NoMatch)
        } else {
            PortalMatch::Delay
        }
    }
}

/// `lnet_try_match_md`: does this ME/MD take the message, and where does it go? On a match the
/// MD's running offset advances; the caller attaches the message (threshold and reference).
pub(crate) fn try_match_md(me: &Me, md: &mut Md, info: &MatchInfo) -> MdMatch {
    if md.zombie || md.exhausted() || !md.options.intersects(info.operation) {
        return MdMatch::None;
    }
    if !me.matches(info.initiator, info.match_bits) {
        return MdMatch::None;
    }
    let offset =
        if md.options.contains(MdOptions::MANAGE_REMOTE) { info.remote_offset } else { md.offset };
    // Room from `offset` to the end; a remote offset past the end leaves none (Lustre would
    // underflow here, we refuse to write out of bounds).
    let room = md.length.saturating_sub(offset);
    let allowed =
        if md.options.contains(MdOptions::MAX_SIZE) { md.max_size.min(room) } else { room };
    let mlength = if info.rlength <= allowed {
        info.rlength
    } else if md.options.contains(MdOptions::TRUNCATE) {
        allowed
    } else {
        return MdMatch::TooBig;
    };
    md.offset = offset.saturating_add(mlength);
    MdMatch::Ok { offset, mlength }
}

/// The MEs with one exact match-bits value, in insertion order. Nearly always one (an RPC's
/// buffer has bits of its own), kept inline: the list comes and goes with each message.
#[derive(Debug)]
enum ExactList {
    One(Key),
    Many(VecDeque<Key>),
}

impl ExactList {
    fn insert(&mut self, key: Key, position: InsertPosition) {
        if let Self::One(only) = *self {
            *self = Self::Many(VecDeque::from([only]));
        }
        if let Self::Many(keys) = self {
            match position {
                InsertPosition::Before => keys.push_front(key),
                InsertPosition::After => keys.push_back(key),
            }
        }
    }

    fn as_slices(&self) -> (&[Key], &[Key]) {
        match self {
            Self::One(only) => (std::slice::from_ref(only), &[]),
            Self::Many(keys) => keys.as_slices(),
        }
    }
}

fn remove_key(list: &mut VecDeque<Key>, key: Key) -> bool {
    match list.iter().position(|k| *k == key) {
        Some(position) => list.remove(position).is_some(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::{Net, Nid};
    use crate::engine::md::{MdHandle, Threshold};
    use crate::engine::me::LNET_PID_ANY;
    use crate::engine::memory::Memory;

    fn md(length: u32, options: MdOptions) -> Md {
        Md {
            handle: MdHandle(1),
            memory: Memory::new(vec![0; length as usize]),
            length,
            offset: 0,
            max_size: 0,
            threshold: Threshold::Infinite,
            options,
            user_ptr: 0,
            events: true,
            refcount: 0,
            me: None,
            auto_unlink: false,
            zombie: false,
            aborted: false,
            tracker: None,
            owner: crate::engine::md::MdOwner::User,
        }
    }

    fn info(match_bits: u64, rlength: u32) -> MatchInfo {
        MatchInfo {
            initiator: ProcessId::new(Nid::new4(Net::TCP, 1), 12345),
            operation: MdOptions::OP_PUT,
            match_bits,
            remote_offset: 0,
            rlength,
        }
    }

    fn wildcard_me(match_bits: u64, ignore_bits: u64) -> Me {
        Me {
            portal: 1,
            match_id: ProcessId::ANY,
            match_bits,
            ignore_bits,
            unlink: crate::engine::md::UnlinkMode::Retain,
            md: None,
            internal: false,
        }
    }

    #[test]
    fn ignore_bit_entries_are_searched_first() {
        let mut portal = Portal::default();
        let mut mes = Mes::default();
        let mut mds = Mds::default();
        // The exact ME is inserted first but the ignore-bits ME still wins.
        for me in [wildcard_me(0x5, 0), wildcard_me(0x0, 0xff)] {
            let md_key = mds.insert(md(8, MdOptions::OP_PUT)).unwrap();
            let key = mes.insert(Me { md: Some(md_key), ..me.clone() }).unwrap();
            assert!(portal.accepts(&me));
            portal.insert(key, &me, InsertPosition::After);
        }
        let result = portal.match_md(&mes, &mut mds, &info(0x5, 4));
        let PortalMatch::Ok { me, .. } = result else { panic!("no match: {result:?}") };
        assert_eq!(mes.get(me).map(|m| m.ignore_bits), Some(0xff));
        assert_eq!(portal.entries(), 2);
    }

    #[test]
    fn exact_entries_keep_insertion_order_through_removals() {
        let mut portal = Portal::default();
        let mut mes = Mes::default();
        let mut mds = Mds::default();
        fn add(portal: &mut Portal, mes: &mut Mes, mds: &mut Mds, position: InsertPosition) -> Key {
            let me = wildcard_me(0x5, 0);
            let md_key = mds.insert(md(8, MdOptions::OP_PUT)).unwrap();
            let key = mes.insert(Me { md: Some(md_key), ..me.clone() }).unwrap();
            portal.insert(key, &me, position);
            key
        }
        let a = add(&mut portal, &mut mes, &mut mds, InsertPosition::After);
        let b = add(&mut portal, &mut mes, &mut mds, InsertPosition::Before);
        let c = add(&mut portal, &mut mes, &mut mds, InsertPosition::After);
        let first = |portal: &Portal, mes: &Mes, mds: &mut Mds| match portal.match_md(
            mes,
            mds,
            &info(0x5, 0),
        ) {
            PortalMatch::Ok { me, .. } => Some(me),
            _ => None,
        };
        assert_eq!(first(&portal, &mes, &mut mds), Some(b));
        let me = wildcard_me(0x5, 0);
        portal.remove(b, &me);
        assert_eq!(first(&portal, &mes, &mut mds), Some(a));
        portal.remove(a, &me);
        assert_eq!(first(&portal, &mes, &mut mds), Some(c));
        portal.remove(a, &me); // already gone: counts nothing
        assert_eq!(portal.entries(), 1);
        portal.remove(c, &me);
        assert_eq!(portal.entries(), 0);
        assert!(portal.exact.is_empty(), "an emptied list leaves the map");
        assert_eq!(first(&portal, &mes, &mut mds), None);
        // A lone entry (the inline case) is found and removed too.
        let d = add(&mut portal, &mut mes, &mut mds, InsertPosition::Before);
        assert_eq!(first(&portal, &mes, &mut mds), Some(d));
        portal.remove(d, &me);
        assert!(portal.exact.is_empty());
    }

    #[test]
    fn match_type_is_fixed_by_the_first_entry() {
        let mut portal = Portal::default();
        let unique =
            Me { match_id: ProcessId::new(Nid::new4(Net::TCP, 1), 7), ..wildcard_me(1, 0) };
        assert!(portal.accepts(&unique));
        assert!(!portal.accepts(&wildcard_me(1, 0)));
        assert!(!portal.accepts(&Me {
            match_id: ProcessId::new(unique.match_id.nid, LNET_PID_ANY),
            ..unique.clone()
        }));
        assert_eq!(portal.match_type, Some(MatchType::Unique));
    }

    #[test]
    fn offsets_truncation_and_max_size() {
        let me = wildcard_me(0, u64::MAX);
        let mut plain = md(10, MdOptions::OP_PUT);
        assert_eq!(
            try_match_md(&me, &mut plain, &info(0, 4)),
            MdMatch::Ok { offset: 0, mlength: 4 }
        );
        assert_eq!(
            try_match_md(&me, &mut plain, &info(0, 4)),
            MdMatch::Ok { offset: 4, mlength: 4 }
        );
        assert_eq!(try_match_md(&me, &mut plain, &info(0, 4)), MdMatch::TooBig);
        let mut truncating = md(10, MdOptions::OP_PUT | MdOptions::TRUNCATE);
        truncating.offset = 8;
        assert_eq!(
            try_match_md(&me, &mut truncating, &info(0, 4)),
            MdMatch::Ok { offset: 8, mlength: 2 }
        );
        let mut remote = md(10, MdOptions::OP_PUT | MdOptions::MANAGE_REMOTE | MdOptions::TRUNCATE);
        let far = MatchInfo { remote_offset: 20, ..info(0, 4) };
        assert_eq!(try_match_md(&me, &mut remote, &far), MdMatch::Ok { offset: 20, mlength: 0 });
        let mut capped = md(10, MdOptions::OP_PUT | MdOptions::MAX_SIZE | MdOptions::TRUNCATE);
        capped.max_size = 3;
        assert_eq!(
            try_match_md(&me, &mut capped, &info(0, 5)),
            MdMatch::Ok { offset: 0, mlength: 3 }
        );
        let mut get_only = md(10, MdOptions::OP_GET);
        assert_eq!(try_match_md(&me, &mut get_only, &info(0, 1)), MdMatch::None);
    }

    #[test]
    fn unmatched_puts_are_delayed_only_on_lazy_portals() {
        let mut portal = Portal::default();
        let mes = Mes::default();
        let mut mds = Mds::default();
        assert_eq!(
            portal.match_md(&mes, &mut mds, &info(1, 1)),
            PortalMatch::Drop(DropReason::NoMatch)
        );
        portal.lazy = true;
        assert_eq!(portal.match_md(&mes, &mut mds, &info(1, 1)), PortalMatch::Delay);
        let get = MatchInfo { operation: MdOptions::OP_GET, ..info(1, 1) };
        assert_eq!(portal.match_md(&mes, &mut mds, &get), PortalMatch::Drop(DropReason::NoMatch));
    }
}
