//! The portal table (`Portals`): per-portal match tables (one per CPU partition), match type,
//! lazy queue, and matching: which table an ME goes to, which table an incoming message tries
//! first (`portal_rotor`), and the steal from the other partitions' tables (decision 0030).
//!
//! lustre: lnet/lnet/lib-ptl.c (`lnet_ptl_match_type`, `lnet_mt_of_attach`, `lnet_mt_of_match`,
//! `lnet_mt_match_md`, `lnet_try_match_md`, `lnet_ptl_attach_md`, `lnet_ptl_match_delay`),
//! docs/protocol/semantics.md §1.1, §1.2, §1.6, §7.3.

use std::collections::VecDeque;

use foldhash::HashMap;
use std::collections::hash_map::Entry;

use crate::addr::Nid;
use crate::engine::md::{Md, MdOptions, Mds};
use crate::engine::me::{InsertPosition, Me, Mes, ProcessId};
use crate::engine::shares::Shares;
use crate::engine::slab::Key;
use crate::engine::stamp::Stamp;
use crate::engine::tunables::PortalRotor;
use crate::engine::view::{Access, Exclusive};

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
    /// The portals of a node with `partitions` CPU partitions: each has one match table per
    /// partition (lustre: lib-ptl.c `lnet_ptl_setup()`).
    pub(crate) fn new(partitions: u32) -> Self {
        Self { table: (0..MAX_PORTALS).map(|index| Portal::new(index, partitions)).collect() }
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

    /// Whether a call changed the portal-wide state (the rotor, the delayed messages) since
    /// the audit last took it: `u64::MAX` if so (what each partition changes is its
    /// [`MatchTables`]).
    #[cfg(test)]
    pub(crate) fn take_touched(&self) -> u64 {
        self.table.iter().fold(0, |touched, portal| touched | portal.touched.take())
    }
}

/// Where an incoming message stands when it picks a match table (what `lnet_mt_of_match()`
/// reads besides the portal). Meaningless with one partition, where there is no choice.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct MatchPlace {
    /// The partition receiving it (the kernel's `lnet_cpt_current()` on the LND thread that
    /// parses it: the previous hop's partition on the receiving NI).
    pub(crate) current: u32,
    /// Its source is on another net than its destination (it came through a router).
    pub(crate) routed: bool,
    /// `mi_cpt`: the initiator's partition on the receiving NI (`lnet_nid2cpt(initiator, ni)`).
    pub(crate) initiator_on_ni: u32,
    /// The initiator's partition over all partitions (`lnet_nid2cpt(initiator, NULL)`), the
    /// table of a unique portal.
    pub(crate) initiator: u32,
    pub(crate) rotor: PortalRotor,
}

/// One partition's match table of a portal, as seen from outside (tests, statistics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MatchTableStats {
    /// MEs in this table.
    pub entries: usize,
    /// Messages matched to an MD of this table (stolen ones and delayed ones included).
    pub matched: u64,
    /// Of those, messages that had tried another partition's table first and found nothing
    /// there (`lnet_ptl_match_delay()`'s steal).
    pub stolen: u64,
}

/// One portal: its match type, laziness, delayed PUTs and one match table per partition
/// (`struct lnet_portal`).
#[derive(Debug)]
pub(crate) struct Portal {
    index: u32,
    pub(crate) match_type: Option<MatchType>,
    pub(crate) lazy: bool,
    /// `ptl_mtables`: how many, one per partition (at least one), each in its partition's
    /// part ([`MatchTables`]).
    tables: u32,
    /// Delayed PUTs on a lazy portal, FIFO (`ptl_msg_delayed`): one list for the portal, as
    /// any MD attached to any table may take them.
    delayed: VecDeque<Key>,
    /// `ptl_rotor`: the round-robin counter of incoming messages, a relaxed atomic as the
    /// round-robin stamps are (`stamp.rs`): calls on any partition turn it.
    rotor: Stamp,
    /// See [`Portals::take_touched`] (the engine's partition audit).
    #[cfg(test)]
    touched: std::cell::Cell<u64>,
}

impl Default for Portal {
    fn default() -> Self {
        Self::new(1, 1)
    }
}

impl Portal {
    fn new(index: u32, partitions: u32) -> Self {
        Self {
            index,
            match_type: None,
            lazy: false,
            tables: partitions.max(1),
            delayed: VecDeque::new(),
            rotor: Stamp::default(),
            #[cfg(test)]
            touched: std::cell::Cell::new(0),
        }
    }

    /// Partition `cpt`'s match table of this portal, among the partitions' `tables`.
    fn table<'t>(
        &self,
        tables: &'t Shares<'_, impl Access, MatchTables>,
        cpt: u32,
    ) -> Option<&'t MatchTable> {
        tables.share(cpt)?.tables.get(self.index as usize)
    }

    /// Partition `cpt`'s match table of this portal, to change.
    fn table_mut<'t>(
        &self,
        tables: &'t mut Shares<'_, Exclusive, MatchTables>,
        cpt: u32,
    ) -> Option<&'t mut MatchTable> {
        let share = tables.share_mut(cpt)?;
        #[cfg(test)]
        {
            share.touched = true;
        }
        share.tables.get_mut(self.index as usize)
    }

    /// The PUTs delayed on this lazy portal, oldest first.
    pub(crate) fn delayed(&self) -> &VecDeque<Key> {
        &self.delayed
    }

    /// The delayed PUTs, to change: state of the whole portal, which every partition's
    /// messages and MDs reach.
    pub(crate) fn delayed_mut(&mut self) -> &mut VecDeque<Key> {
        #[cfg(test)]
        self.touched.set(u64::MAX);
        &mut self.delayed
    }

    /// Checks (and on first use fixes) the match type for a new ME; false is Lustre's -EPERM.
    /// Whether `me` is of this portal's match type (none yet: any).
    pub(crate) fn matches_type(&self, me: &Me) -> bool {
        let wanted = if me.is_unique() { MatchType::Unique } else { MatchType::Wildcard };
        self.match_type.is_none_or(|match_type| match_type == wanted)
    }

    pub(crate) fn accepts(&mut self, me: &Me) -> bool {
        let wanted = if me.is_unique() { MatchType::Unique } else { MatchType::Wildcard };
        *self.match_type.get_or_insert(wanted) == wanted
    }

    /// The partition whose table takes a new ME (after [`Self::accepts`]): the only one, the
    /// hash of the ME's NID on a unique portal, else the attaching partition for `Local` and
    /// the portal's fixed table for `Before`/`After` (posters with no affinity all go to one
    /// table, so that nothing has to be stolen). `Local`'s partition is checked by the caller.
    /// lustre: lib-ptl.c `lnet_mt_of_attach()`, `lnet_match2mt()`.
    pub(crate) fn table_of_attach(
        &self,
        me: &Me,
        position: InsertPosition,
        cpt_of_nid: impl FnOnce(&Nid) -> u32,
    ) -> u32 {
        let count = self.tables;
        if count == 1 {
            return 0;
        }
        if self.match_type == Some(MatchType::Unique) {
            return cpt_of_nid(&me.match_id.nid) % count;
        }
        match position {
            InsertPosition::Local { cpt } => cpt % count,
            InsertPosition::Before | InsertPosition::After => self.index % count,
        }
    }

    /// Files `key` (whose `me.cpt` is set) in its table.
    pub(crate) fn insert(
        &self,
        tables: &mut Shares<'_, Exclusive, MatchTables>,
        key: Key,
        me: &Me,
        position: InsertPosition,
    ) {
        if let Some(table) = self.table_mut(tables, me.cpt) {
            table.insert(key, me, position);
        }
    }

    pub(crate) fn remove(
        &self,
        tables: &mut Shares<'_, Exclusive, MatchTables>,
        key: Key,
        me: &Me,
    ) {
        if let Some(table) = self.table_mut(tables, me.cpt) {
            table.remove(key, me);
        }
    }

    /// MEs on this portal, in the tables of the partitions held.
    pub(crate) fn entries(&self, tables: &Shares<'_, impl Access, MatchTables>) -> usize {
        self.tables_held(tables).map(|table| table.entries).sum()
    }

    /// The match tables' statistics, by partition held.
    pub(crate) fn table_stats(
        &self,
        tables: &Shares<'_, impl Access, MatchTables>,
    ) -> Vec<MatchTableStats> {
        self.tables_held(tables)
            .map(|table| MatchTableStats {
                entries: table.entries,
                matched: table.matched,
                stolen: table.stolen,
            })
            .collect()
    }

    fn tables_held<'t>(
        &self,
        tables: &'t Shares<'_, impl Access, MatchTables>,
    ) -> impl Iterator<Item = &'t MatchTable> {
        let index = self.index as usize;
        tables.iter_shares().filter_map(move |(_, share)| share.tables.get(index))
    }

    /// Counts a delayed message taken by an MD of partition `cpt`'s table.
    pub(crate) fn count_match(&self, tables: &mut Shares<'_, Exclusive, MatchTables>, cpt: u32) {
        if let Some(table) = self.table_mut(tables, cpt) {
            table.matched += 1;
        }
    }

    /// `lnet_ptl_match_md`: finds the buffer for an incoming PUT or GET. The message tries
    /// the table `lnet_mt_of_match()` picks; a PUT on a lazy wildcard portal that finds
    /// nothing there tries the other partitions' tables in partition order before it is
    /// delayed (`lnet_ptl_match_delay()`), while a GET or a PUT on a portal that is not lazy
    /// is dropped, as the kernel drops it, even if another table had a buffer. With one
    /// partition that is the one table, as before partitions.
    pub(crate) fn match_md(
        &self,
        tables: &mut Shares<'_, Exclusive, MatchTables>,
        mes: &Shares<'_, impl Access, Mes>,
        mds: &mut Shares<'_, Exclusive, Mds>,
        info: &MatchInfo,
        place: &MatchPlace,
    ) -> PortalMatch {
        // lustre: lnet_ptl_match_early(): nothing was ever attached here.
        let Some(match_type) = self.match_type else {
            return self.miss(info);
        };
        let chosen = if self.tables == 1 {
            0
        } else {
            self.table_of_match(tables, match_type, mes, mds, place)
        };
        if let Some(found) = self.match_in(tables, chosen, mes, mds, info, false) {
            return found;
        }
        let steal = self.tables > 1
            && match_type == MatchType::Wildcard
            && self.lazy
            && info.operation != MdOptions::OP_GET;
        if steal {
            // The steal walks the tables in partition order: deterministic, and the same
            // outcome as the kernel's walk from the lowest active table (a table with no
            // usable MD cannot match). The chosen table already said no.
            for cpt in 0..self.tables {
                if cpt == chosen {
                    continue;
                }
                if let Some(found) = self.match_in(tables, cpt, mes, mds, info, true) {
                    return found;
                }
            }
        }
        self.miss(info)
    }

    /// The partition whose table [`match_md`](Self::match_md) would settle in, without
    /// matching: `None` when it could not be told without taking the rotor or walking other
    /// partitions' tables (a wildcard portal whose local table is not armed, or one that
    /// would steal), or when the message would be delayed (the portal's delayed list is
    /// shared by its tables), which only the whole node may do.
    pub(crate) fn plan_match(
        &self,
        tables: &Shares<'_, impl Access, MatchTables>,
        mes: &Shares<'_, impl Access, Mes>,
        mds: &Shares<'_, impl Access, Mds>,
        info: &MatchInfo,
        place: &MatchPlace,
    ) -> Option<u32> {
        let count = self.tables;
        // A PUT on a lazy portal that matches nothing is delayed, or steals first.
        let delays = self.lazy && info.operation != MdOptions::OP_GET;
        let Some(match_type) = self.match_type else {
            return (!delays).then_some(0);
        };
        let chosen = if count == 1 || match_type == MatchType::Unique {
            // No steal on a unique portal: the hashed table matches or the message drops.
            place.initiator % count
        } else {
            let local_first = match place.rotor {
                PortalRotor::Off => true,
                PortalRotor::On => false,
                PortalRotor::RoutedRoundRobin | PortalRotor::RoutedHash => !place.routed,
            };
            let current = place.current % count;
            if !local_first || !self.armed(tables, current, mes, mds) {
                return None;
            }
            current
        };
        if tables.share(chosen).is_none() {
            // Not held: named, so that the plan is made again with it.
            return Some(chosen);
        }
        let table = self.table(tables, chosen)?;
        (!delays || table.peek_match(mes, mds, info)).then_some(chosen)
    }

    /// What a message that matched nothing becomes.
    fn miss(&self, info: &MatchInfo) -> PortalMatch {
        if info.operation == MdOptions::OP_GET || !self.lazy {
            PortalMatch::Drop(DropReason::NoMatch)
        } else {
            PortalMatch::Delay
        }
    }

    /// Matches in partition `cpt`'s table: `None` when nothing there takes the message.
    fn match_in(
        &self,
        tables: &mut Shares<'_, Exclusive, MatchTables>,
        cpt: u32,
        mes: &Shares<'_, impl Access, Mes>,
        mds: &mut Shares<'_, Exclusive, Mds>,
        info: &MatchInfo,
        stolen: bool,
    ) -> Option<PortalMatch> {
        let table = self.table_mut(tables, cpt)?;
        match table.match_md(mes, mds, info) {
            TableMatch::None => None,
            TableMatch::TooBig => Some(PortalMatch::Drop(DropReason::TooBig)),
            TableMatch::Ok { me, md, offset, mlength } => {
                table.matched += 1;
                if stolen {
                    table.stolen += 1;
                }
                Some(PortalMatch::Ok { me, md, offset, mlength })
            }
        }
    }

    /// `lnet_mt_of_match()`: the table an incoming message tries first on a node with several
    /// partitions. A unique portal hashes the initiator; a wildcard portal follows
    /// `portal_rotor`, and a table with no usable buffer hands the message to one that has
    /// (`ptl_mt_maps`), which the kernel keeps as a map of enabled tables and ulnet computes.
    fn table_of_match(
        &self,
        tables: &Shares<'_, impl Access, MatchTables>,
        match_type: MatchType,
        mes: &Shares<'_, impl Access, Mes>,
        mds: &Shares<'_, impl Access, Mds>,
        place: &MatchPlace,
    ) -> u32 {
        let count = self.tables;
        if match_type == MatchType::Unique {
            return place.initiator % count;
        }
        let local_first = match place.rotor {
            PortalRotor::Off => true,
            PortalRotor::On => false,
            PortalRotor::RoutedRoundRobin | PortalRotor::RoutedHash => !place.routed,
        };
        let current = place.current % count;
        if local_first && self.armed(tables, current, mes, mds) {
            return current;
        }
        // Truncated: the kernel's rotor is an int.
        let rotor = self.rotor.get() as u32;
        self.rotor.set(u64::from(rotor.wrapping_add(1)));
        #[cfg(test)]
        self.touched.set(u64::MAX);
        let cpt = if place.rotor == PortalRotor::RoutedHash && place.routed {
            place.initiator_on_ni % count
        } else {
            rotor % count
        };
        if self.armed(tables, cpt, mes, mds) {
            return cpt;
        }
        let active = (0..count).filter(|&cpt| self.armed(tables, cpt, mes, mds)).count() as u32;
        if active == 0 {
            return cpt;
        }
        (0..count)
            .filter(|&cpt| self.armed(tables, cpt, mes, mds))
            .nth((rotor % active) as usize)
            .unwrap_or(cpt)
    }

    /// Whether partition `cpt`'s table has a buffer that could take a message: the kernel's
    /// `mt_enabled`, which it updates lazily from exhaustion bitmaps; ulnet asks the table.
    fn armed(
        &self,
        tables: &Shares<'_, impl Access, MatchTables>,
        cpt: u32,
        mes: &Shares<'_, impl Access, Mes>,
        mds: &Shares<'_, impl Access, Mds>,
    ) -> bool {
        self.table(tables, cpt).is_some_and(|table| table.armed(mes, mds))
    }
}

/// One partition's match table of every portal, by portal index: what a partition's calls
/// match in (`ptl_mtables[cpt]`).
#[derive(Debug)]
pub(crate) struct MatchTables {
    tables: Vec<MatchTable>,
    /// Whether a call changed a table here since the audit last took it.
    #[cfg(test)]
    touched: bool,
}

impl Default for MatchTables {
    fn default() -> Self {
        Self {
            tables: (0..MAX_PORTALS).map(|_| MatchTable::default()).collect(),
            #[cfg(test)]
            touched: false,
        }
    }
}

impl<'a> Shares<'a, Exclusive, MatchTables> {
    /// Whether a call changed a partition's tables since the audit last took it, one bit
    /// each.
    #[cfg(test)]
    pub(crate) fn take_touched(&mut self) -> u64 {
        self.iter_shares_mut()
            .filter_map(|(cpt, share)| std::mem::take(&mut share.touched).then_some(cpt))
            .fold(0, |bits, cpt| bits | 1 << cpt.min(63))
    }
}

/// What one table made of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TableMatch {
    None,
    TooBig,
    Ok { me: Key, md: Key, offset: u32, mlength: u32 },
}

/// One partition's MEs of a portal (`struct lnet_match_table`). Lustre hashes MEs into
/// buckets; the observable order is "MEs with ignore bits first, in insertion order, then the
/// MEs whose exact bits equal the incoming bits, in insertion order". We keep exactly those
/// two sequences: one ordered list of ignore-bit MEs and, for exact MEs, an ordered list per
/// match-bits value.
#[derive(Debug, Default)]
struct MatchTable {
    ignore: VecDeque<Key>,
    exact: HashMap<u64, ExactList>,
    entries: usize,
    matched: u64,
    stolen: u64,
}

impl MatchTable {
    fn insert(&mut self, key: Key, me: &Me, position: InsertPosition) {
        if me.ignore_bits != 0 {
            if position.is_front() {
                self.ignore.push_front(key);
            } else {
                self.ignore.push_back(key);
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

    fn remove(&mut self, key: Key, me: &Me) {
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

    /// `lnet_mt_match_md`: the first ME/MD of this table that takes the message.
    fn match_md(
        &self,
        mes: &Shares<'_, impl Access, Mes>,
        mds: &mut Shares<'_, Exclusive, Mds>,
        info: &MatchInfo,
    ) -> TableMatch {
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
                MdMatch::TooBig => return TableMatch::TooBig,
                MdMatch::Ok { offset, mlength } => {
                    return TableMatch::Ok { me: me_key, md: md_key, offset, mlength };
                }
            }
        }
        TableMatch::None
    }

    /// Whether [`match_md`](Self::match_md) would settle here (a match, or a drop for size).
    fn peek_match(
        &self,
        mes: &Shares<'_, impl Access, Mes>,
        mds: &Shares<'_, impl Access, Mds>,
        info: &MatchInfo,
    ) -> bool {
        let exact = self.exact.get(&info.match_bits).map(ExactList::as_slices);
        let (first, second) = exact.unwrap_or_default();
        self.ignore.iter().chain(first).chain(second).any(|&me_key| {
            let Some(me) = mes.get(me_key) else { return false };
            let Some(md) = me.md.and_then(|md| mds.get(md)) else { return false };
            peek_match_md(me, md, info) != MdMatch::None
        })
    }

    /// Whether an ME here has an MD that is neither exhausted nor unlinking. Stops at the
    /// first; linear only in MEs with no usable MD in front of it.
    fn armed(
        &self,
        mes: &Shares<'_, impl Access, Mes>,
        mds: &Shares<'_, impl Access, Mds>,
    ) -> bool {
        let usable = |key: &Key| {
            mes.get(*key)
                .and_then(|me| me.md)
                .and_then(|md| mds.get(md))
                .is_some_and(|md| !md.zombie && !md.exhausted())
        };
        self.ignore.iter().any(usable)
            || self.exact.values().any(|list| {
                let (first, second) = list.as_slices();
                first.iter().chain(second).any(usable)
            })
    }
}

/// `lnet_try_match_md`: does this ME/MD take the message, and where does it go? On a match the
/// MD's running offset advances; the caller attaches the message (threshold and reference).
pub(crate) fn try_match_md(me: &Me, md: &mut Md, info: &MatchInfo) -> MdMatch {
    let found = peek_match_md(me, md, info);
    if let MdMatch::Ok { offset, mlength } = found {
        md.offset = offset.saturating_add(mlength);
    }
    found
}

/// [`try_match_md`] without taking anything: what it would answer.
pub(crate) fn peek_match_md(me: &Me, md: &Md, info: &MatchInfo) -> MdMatch {
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
                _ if position.is_front() => keys.push_front(key),
                _ => keys.push_back(key),
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
    use crate::engine::shares::Owned;
    use crate::engine::slab::KeyPartitions;

    /// A portal with its partitions' match tables, as the engine's views hold them.
    struct TestPortal {
        portal: Portal,
        tables: Owned<MatchTables>,
    }

    impl TestPortal {
        fn new(index: u32, partitions: u32) -> Self {
            let tables = Owned::new(KeyPartitions::new(partitions), |_, _| MatchTables::default());
            Self { portal: Portal::new(index, partitions), tables }
        }

        fn insert(&mut self, key: Key, me: &Me, position: InsertPosition) {
            self.portal.insert(&mut self.tables.exclusive(), key, me, position);
        }

        fn remove(&mut self, key: Key, me: &Me) {
            self.portal.remove(&mut self.tables.exclusive(), key, me);
        }

        fn match_md(
            &mut self,
            mes: &Shares<'_, impl Access, Mes>,
            mds: &mut Shares<'_, Exclusive, Mds>,
            info: &MatchInfo,
            place: &MatchPlace,
        ) -> PortalMatch {
            self.portal.match_md(&mut self.tables.exclusive(), mes, mds, info, place)
        }

        fn plan_match(
            &self,
            mes: &Shares<'_, impl Access, Mes>,
            mds: &Shares<'_, impl Access, Mds>,
            info: &MatchInfo,
            place: &MatchPlace,
        ) -> Option<u32> {
            self.portal.plan_match(&self.tables.shared(), mes, mds, info, place)
        }

        fn entries(&self) -> usize {
            self.portal.entries(&self.tables.shared())
        }

        fn table_stats(&self) -> Vec<MatchTableStats> {
            self.portal.table_stats(&self.tables.shared())
        }

        /// Whether partition `cpt`'s table holds no exact-bits list.
        fn exact_is_empty(&self, cpt: u32) -> bool {
            let tables = self.tables.shared();
            let table = self.portal.table(&tables, cpt).unwrap();
            table.exact.is_empty()
        }
    }

    impl std::ops::Deref for TestPortal {
        type Target = Portal;

        fn deref(&self) -> &Portal {
            &self.portal
        }
    }

    impl std::ops::DerefMut for TestPortal {
        fn deref_mut(&mut self) -> &mut Portal {
            &mut self.portal
        }
    }

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
            handler: 0,
            refcount: 0,
            me: None,
            auto_unlink: false,
            zombie: false,
            lent: false,
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
            cpt: 0,
        }
    }

    const HERE: MatchPlace = MatchPlace {
        current: 0,
        routed: false,
        initiator_on_ni: 0,
        initiator: 0,
        rotor: PortalRotor::RoutedHash,
    };

    #[test]
    fn ignore_bit_entries_are_searched_first() {
        let mut portal = TestPortal::new(1, 1);
        let mut mes = Owned::new(KeyPartitions::new(1), Mes::new);
        let mut mds = Owned::new(KeyPartitions::new(1), Mds::new);
        // The exact ME is inserted first but the ignore-bits ME still wins.
        for me in [wildcard_me(0x5, 0), wildcard_me(0x0, 0xff)] {
            let md_key = mds.exclusive().insert(0, md(8, MdOptions::OP_PUT)).unwrap();
            let key = mes.exclusive().insert(Me { md: Some(md_key), ..me.clone() }).unwrap();
            assert!(portal.accepts(&me));
            portal.insert(key, &me, InsertPosition::After);
        }
        let result = portal.match_md(&mes.shared(), &mut mds.exclusive(), &info(0x5, 4), &HERE);
        let PortalMatch::Ok { me, .. } = result else { panic!("no match: {result:?}") };
        assert_eq!(mes.shared().get(me).map(|m| m.ignore_bits), Some(0xff));
        assert_eq!(portal.entries(), 2);
    }

    #[test]
    fn exact_entries_keep_insertion_order_through_removals() {
        let mut portal = TestPortal::new(1, 1);
        let mut mes = Owned::new(KeyPartitions::new(1), Mes::new);
        let mut mds = Owned::new(KeyPartitions::new(1), Mds::new);
        fn add(
            portal: &mut TestPortal,
            mes: &mut Owned<Mes>,
            mds: &mut Owned<Mds>,
            position: InsertPosition,
        ) -> Key {
            let me = wildcard_me(0x5, 0);
            assert!(portal.accepts(&me));
            let md_key = mds.exclusive().insert(0, md(8, MdOptions::OP_PUT)).unwrap();
            let key = mes.exclusive().insert(Me { md: Some(md_key), ..me.clone() }).unwrap();
            portal.insert(key, &me, position);
            key
        }
        let a = add(&mut portal, &mut mes, &mut mds, InsertPosition::After);
        let b = add(&mut portal, &mut mes, &mut mds, InsertPosition::Before);
        let c = add(&mut portal, &mut mes, &mut mds, InsertPosition::After);
        let first = |portal: &mut TestPortal, mes: &Owned<Mes>, mds: &mut Owned<Mds>| match portal
            .match_md(&mes.shared(), &mut mds.exclusive(), &info(0x5, 0), &HERE)
        {
            PortalMatch::Ok { me, .. } => Some(me),
            _ => None,
        };
        assert_eq!(first(&mut portal, &mes, &mut mds), Some(b));
        let me = wildcard_me(0x5, 0);
        portal.remove(b, &me);
        assert_eq!(first(&mut portal, &mes, &mut mds), Some(a));
        portal.remove(a, &me);
        assert_eq!(first(&mut portal, &mes, &mut mds), Some(c));
        portal.remove(a, &me); // already gone: counts nothing
        assert_eq!(portal.entries(), 1);
        portal.remove(c, &me);
        assert_eq!(portal.entries(), 0);
        assert!(portal.exact_is_empty(0), "an emptied list leaves the map");
        assert_eq!(first(&mut portal, &mes, &mut mds), None);
        // A lone entry (the inline case) is found and removed too.
        let d = add(&mut portal, &mut mes, &mut mds, InsertPosition::Before);
        assert_eq!(first(&mut portal, &mes, &mut mds), Some(d));
        portal.remove(d, &me);
        assert!(portal.exact_is_empty(0));
    }

    #[test]
    fn match_type_is_fixed_by_the_first_entry() {
        let mut portal = TestPortal::new(1, 1);
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
        let mut portal = TestPortal::new(1, 1);
        let mes = Owned::new(KeyPartitions::new(1), Mes::new);
        let mut mds = Owned::new(KeyPartitions::new(1), Mds::new);
        assert_eq!(
            portal.match_md(&mes.shared(), &mut mds.exclusive(), &info(1, 1), &HERE),
            PortalMatch::Drop(DropReason::NoMatch)
        );
        portal.lazy = true;
        assert_eq!(
            portal.match_md(&mes.shared(), &mut mds.exclusive(), &info(1, 1), &HERE),
            PortalMatch::Delay
        );
        let get = MatchInfo { operation: MdOptions::OP_GET, ..info(1, 1) };
        assert_eq!(
            portal.match_md(&mes.shared(), &mut mds.exclusive(), &get, &HERE),
            PortalMatch::Drop(DropReason::NoMatch)
        );
    }

    /// A portal of `partitions` tables with one match-all ME and an endless MD in each table
    /// of `armed`; returns the ME keys by table.
    fn spread(
        partitions: u32,
        armed: &[u32],
        mes: &mut Owned<Mes>,
        mds: &mut Owned<Mds>,
    ) -> (TestPortal, Vec<Option<Key>>) {
        let mut portal = TestPortal::new(5, partitions);
        let mut keys = vec![None; partitions as usize];
        for &cpt in armed {
            let me = Me { cpt, ..wildcard_me(0, u64::MAX) };
            assert!(portal.accepts(&me));
            assert_eq!(
                portal.table_of_attach(&me, InsertPosition::Local { cpt }, hash(partitions)),
                cpt
            );
            let spec = md(1 << 20, MdOptions::OP_PUT | MdOptions::OP_GET);
            let md_key = mds.exclusive().insert(cpt, spec).unwrap();
            let key = mes.exclusive().insert(Me { md: Some(md_key), ..me.clone() }).unwrap();
            portal.insert(key, &me, InsertPosition::Local { cpt });
            keys[cpt as usize] = Some(key);
        }
        (portal, keys)
    }

    fn parts(count: u32) -> crate::engine::cpt::Partitions {
        crate::engine::cpt::Partitions::new(count).unwrap()
    }

    /// The NID hash over all of `count` partitions (no net restricted).
    fn hash(count: u32) -> impl Fn(&Nid) -> u32 {
        move |nid| parts(count).cpt_of_nid(nid, None)
    }

    /// The table each of `count` PUTs from `place` matched in.
    fn tables_hit(
        portal: &mut TestPortal,
        keys: &[Option<Key>],
        mes: &Owned<Mes>,
        mds: &mut Owned<Mds>,
        place: &MatchPlace,
        count: usize,
    ) -> Vec<usize> {
        (0..count)
            .map(|_| {
                match portal.match_md(&mes.shared(), &mut mds.exclusive(), &info(0, 1), place) {
                    PortalMatch::Ok { me, .. } => keys.iter().position(|k| *k == Some(me)).unwrap(),
                    other => panic!("no match: {other:?}"),
                }
            })
            .collect()
    }

    fn place(current: u32, routed: bool, initiator_on_ni: u32, rotor: PortalRotor) -> MatchPlace {
        MatchPlace { current, routed, initiator_on_ni, initiator: 0, rotor }
    }

    /// `lnet_mt_of_attach()`: a wildcard portal's Before/After go to the fixed table (index
    /// mod count), Local to its partition; a unique portal hashes the ME's NID whatever the
    /// position (10.0.0.1@tcp: byte sum 13, so table 1 of 2 and 13 % 3 = 1 of 3).
    #[test]
    fn attach_table_choice() {
        let wildcard = TestPortal::new(5, 3);
        let me = wildcard_me(1, 0);
        assert_eq!(wildcard.table_of_attach(&me, InsertPosition::After, hash(3)), 2);
        assert_eq!(wildcard.table_of_attach(&me, InsertPosition::Before, hash(3)), 2);
        assert_eq!(wildcard.table_of_attach(&me, InsertPosition::Local { cpt: 1 }, hash(3)), 1);
        let mut unique = TestPortal::new(5, 2);
        let me = Me {
            match_id: ProcessId::new(Nid::new4(Net::TCP, 0x0a00_0001), 7),
            ..wildcard_me(1, 0)
        };
        assert!(unique.accepts(&me));
        for position in [InsertPosition::After, InsertPosition::Local { cpt: 0 }] {
            assert_eq!(unique.table_of_attach(&me, position, hash(2)), 1);
        }
        // One partition: always the one table.
        let single = TestPortal::new(5, 1);
        assert_eq!(single.table_of_attach(&me, InsertPosition::Local { cpt: 0 }, hash(1)), 0);
    }

    /// A plan names the table a message settles in only where matching needs nothing
    /// portal-wide: a PUT on a lazy portal that would be delayed (its list is the portal's,
    /// even with nothing attached yet) or that would steal plans the whole node; a GET that
    /// would miss drops in its own table.
    #[test]
    fn plans_leave_delays_and_steals_to_the_node() {
        let (mut mes, mut mds) = (
            Owned::new(KeyPartitions::new(2), Mes::new),
            Owned::new(KeyPartitions::new(2), Mds::new),
        );
        let mut fresh = TestPortal::new(5, 2);
        let put = info(0, 1);
        let get = MatchInfo { operation: MdOptions::OP_GET, ..put };
        assert_eq!(fresh.plan_match(&mes.shared(), &mds.shared(), &put, &HERE), Some(0));
        fresh.lazy = true;
        assert_eq!(fresh.plan_match(&mes.shared(), &mds.shared(), &put, &HERE), None);
        assert_eq!(fresh.plan_match(&mes.shared(), &mds.shared(), &get, &HERE), Some(0));
        let (mut portal, _) = spread(2, &[1], &mut mes, &mut mds);
        let on = |current: u32| place(current, false, 0, PortalRotor::RoutedHash);
        assert_eq!(portal.plan_match(&mes.shared(), &mds.shared(), &put, &on(1)), Some(1));
        assert_eq!(
            portal.plan_match(&mes.shared(), &mds.shared(), &put, &on(0)),
            None,
            "rotor or steal"
        );
        portal.lazy = true;
        assert_eq!(portal.plan_match(&mes.shared(), &mds.shared(), &put, &on(1)), Some(1));
        // Larger than the MD takes: dropped by its table, lazy or not (no steal, no delay).
        let wide = MatchInfo { rlength: 2 << 20, ..put };
        assert_eq!(portal.plan_match(&mes.shared(), &mds.shared(), &wide, &on(1)), Some(1));
        portal.lazy = false;
        assert_eq!(portal.plan_match(&mes.shared(), &mds.shared(), &wide, &on(1)), Some(1));
    }

    /// Rotor 3 (the default) and 2 keep a local message on the receiving partition's table;
    /// 3 hashes a routed one by its initiator, 2 rotates it; 1 rotates everything; 0 keeps
    /// everything local.
    #[test]
    fn rotor_modes_pick_the_first_table() {
        let (mut mes, mut mds) = (
            Owned::new(KeyPartitions::new(3), Mes::new),
            Owned::new(KeyPartitions::new(3), Mds::new),
        );
        let (mut portal, keys) = spread(3, &[0, 1, 2], &mut mes, &mut mds);
        let mut hits = |place: MatchPlace| {
            let before = portal.rotor.get();
            let hit = tables_hit(&mut portal, &keys, &mes, &mut mds, &place, 4);
            (hit, portal.rotor.get() - before)
        };
        use PortalRotor::{Off, On, RoutedHash, RoutedRoundRobin};
        assert_eq!(hits(place(2, false, 0, RoutedHash)), (vec![2, 2, 2, 2], 0));
        assert_eq!(hits(place(2, true, 1, RoutedHash)), (vec![1, 1, 1, 1], 4));
        assert_eq!(hits(place(2, false, 1, RoutedRoundRobin)), (vec![2, 2, 2, 2], 0));
        // The rotor stands at 4 now: 4 % 3 = 1, then 2, 0, 1; then 8 % 3 = 2, ...
        assert_eq!(hits(place(2, true, 0, RoutedRoundRobin)), (vec![1, 2, 0, 1], 4));
        assert_eq!(hits(place(2, false, 0, On)), (vec![2, 0, 1, 2], 4));
        assert_eq!(hits(place(1, true, 0, Off)), (vec![1, 1, 1, 1], 0));
        let stats = portal.table_stats();
        assert_eq!(stats.iter().map(|t| t.matched).sum::<u64>(), 24);
        assert!(stats.iter().all(|t| t.stolen == 0 && t.entries == 1));
    }

    /// A first choice with no usable buffer goes to one that has one (`ptl_mt_maps`), the
    /// rotor indexing the active tables; with none at all, the rotor's own choice (the steal
    /// or the drop follows).
    #[test]
    fn an_empty_first_choice_maps_to_an_active_table() {
        let (mut mes, mut mds) = (
            Owned::new(KeyPartitions::new(4), Mes::new),
            Owned::new(KeyPartitions::new(4), Mds::new),
        );
        let (mut portal, keys) = spread(4, &[1, 3], &mut mes, &mut mds);
        // Local partition 0 is empty: the rotor (0, 1, 2, 3) picks 0, 1, 2, 3; 1 and 3 are
        // active, the others map to active[rotor % 2]: 0 -> 1, 2 -> 1.
        let local = place(0, false, 0, PortalRotor::RoutedHash);
        assert_eq!(tables_hit(&mut portal, &keys, &mes, &mut mds, &local, 4), [1, 1, 1, 3]);
        // Routed, hashed to empty table 2, rotor 4 and 5: active[0] = 1, active[1] = 3.
        let routed = place(0, true, 2, PortalRotor::RoutedHash);
        assert_eq!(tables_hit(&mut portal, &keys, &mes, &mut mds, &routed, 2), [1, 3]);
        // An exhausted MD does not make its table active.
        let md_key = mes.shared().get(keys[1].unwrap()).unwrap().md.unwrap();
        mds.exclusive().get_mut(md_key).unwrap().threshold = Threshold::Count(0);
        assert_eq!(tables_hit(&mut portal, &keys, &mes, &mut mds, &local, 3), [3, 3, 3]);
    }

    /// A PUT that finds nothing in its table steals from the others in partition order on a
    /// lazy portal; a GET, or a PUT on a portal that is not lazy, is dropped as the kernel
    /// drops it.
    #[test]
    fn the_steal_walks_the_other_tables_in_order() {
        let partitions = KeyPartitions::new(3);
        let (mut mes, mut mds) =
            (Owned::new(partitions, Mes::new), Owned::new(partitions, Mds::new));
        let mut portal = TestPortal::new(5, 3);
        // Table 0 holds a buffer for other bits (so it is active and chosen); 2 and 1 hold
        // one-shot buffers for bits 7, posted in that order.
        for (cpt, bits) in [(0, 9), (2, 7), (1, 7)] {
            let me = Me { cpt, ..wildcard_me(bits, 0) };
            assert!(portal.accepts(&me));
            let md_key = mds
                .exclusive()
                .insert(cpt, Md { threshold: Threshold::Count(1), ..md(8, MdOptions::OP_PUT) })
                .unwrap();
            let key = mes.exclusive().insert(Me { md: Some(md_key), ..me.clone() }).unwrap();
            portal.insert(key, &me, InsertPosition::Local { cpt });
        }
        let here = place(0, false, 0, PortalRotor::RoutedHash);
        let put = info(7, 4);
        assert_eq!(
            portal.match_md(&mes.shared(), &mut mds.exclusive(), &put, &here),
            PortalMatch::Drop(DropReason::NoMatch)
        );
        let get = MatchInfo { operation: MdOptions::OP_GET, ..put };
        portal.lazy = true;
        assert_eq!(
            portal.match_md(&mes.shared(), &mut mds.exclusive(), &get, &here),
            PortalMatch::Drop(DropReason::NoMatch)
        );
        // What the engine's commit does: the one-shot MD is used up.
        let stolen = |portal: &mut TestPortal, mds: &mut Owned<Mds>| match portal.match_md(
            &mes.shared(),
            &mut mds.exclusive(),
            &put,
            &here,
        ) {
            PortalMatch::Ok { me, md, .. } => {
                mds.exclusive().get_mut(md).unwrap().threshold = Threshold::Count(0);
                Some(mes.shared().get(me).unwrap().cpt)
            }
            PortalMatch::Delay => None,
            other => panic!("{other:?}"),
        };
        assert_eq!(stolen(&mut portal, &mut mds), Some(1), "partition 1 before 2");
        assert_eq!(stolen(&mut portal, &mut mds), Some(2));
        assert_eq!(stolen(&mut portal, &mut mds), None, "nothing left: delayed");
        let stats = portal.table_stats();
        assert_eq!(
            stats.iter().map(|t| (t.matched, t.stolen)).collect::<Vec<_>>(),
            [(0, 0), (1, 1), (1, 1)]
        );
    }
}
