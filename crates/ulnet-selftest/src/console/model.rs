//! What a console keeps: the session, the nodes it knows, groups, batches and tests.
//! lustre: lnet/selftest/console.h (`struct lstcon_session`, `lstcon_node`, `lstcon_group`,
//! `lstcon_batch`, `lstcon_test`), include/uapi/linux/lnet/lnetst.h.

use std::time::Instant;

use ulnet::ProcessId;
use ulnet::proto::wire::selftest::{BrwCheck, BrwDirection, LST_FEATS_MASK, SessionId, errno};

/// `LST_CONSOLE_TIMEOUT`: a console idle this long ends its session (seconds).
pub const CONSOLE_TIMEOUT_SECONDS: u32 = 300;
/// `LST_DEFAULT_BATCH`: the batch every session starts with.
pub const DEFAULT_BATCH: &str = "batch";
/// `LST_BATCH_IDLE` and `LST_BATCH_RUNNING`, as lst prints them (`State: %d`).
pub const BATCH_IDLE: u32 = 0xB0;
pub const BATCH_RUNNING: u32 = 0xB1;

/// A test node's state as the console sees it (`LST_NODE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum NodeState {
    /// In this session.
    Active,
    /// Taken by another session.
    Busy,
    /// Did not answer.
    Down,
    /// Not in a session (or not asked yet).
    Unknown,
}

impl NodeState {
    /// The `LST_NODE_*` bit.
    pub fn flag(self) -> u32 {
        match self {
            Self::Active => 0x1,
            Self::Busy => 0x2,
            Self::Down => 0x4,
            Self::Unknown => 0x8,
        }
    }

    /// lst's `lst_node_state2str()`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "Active",
            Self::Busy => "Busy",
            Self::Down => "Down",
            Self::Unknown => "Unknown",
        }
    }
}

/// A node the session knows (`struct lstcon_node`).
#[derive(Debug)]
pub(crate) struct NodeEntry {
    pub state: NodeState,
    /// When the state was last set from a reply.
    pub stamp: Instant,
    /// The node's session timeout, from its MAKE_SESSION reply (seconds).
    pub timeout_seconds: u32,
    /// Groups, batch lists and operations holding the node.
    pub refs: usize,
    /// Order of first appearance (`ses_ndl_list`).
    pub order: u64,
    /// The pinger's DEBUG RPC is out.
    pub pinging: bool,
}

/// `struct lstcon_session` (the parts that are not nodes, groups or batches).
#[derive(Debug)]
pub(crate) struct Session {
    pub name: String,
    pub key: u32,
    pub features: u32,
    pub features_updated: bool,
    pub timeout_seconds: u32,
    pub force: bool,
    pub id: SessionId,
    /// The last console operation (`ses_laststamp`).
    pub last_used: Instant,
    pub expired: bool,
    /// `ses_id_cookie`: batch ids.
    pub batch_cookie: u64,
    pub next_ping: Instant,
}

impl Session {
    /// `lstcon_session_feats_check()`: the features every node of the session must share;
    /// the first answer fixes them. Returns an errno (0 when they agree).
    pub fn features_check(&mut self, features: u32) -> u32 {
        if features & !LST_FEATS_MASK != 0 {
            return errno::EPROTO;
        }
        if !self.features_updated {
            self.features_updated = true;
            self.features = features;
        }
        if self.features != features { errno::EPROTO } else { 0 }
    }
}

/// A named, ordered list of nodes (`struct lstcon_group`).
#[derive(Debug)]
pub(crate) struct Group {
    pub name: String,
    pub nodes: Vec<ProcessId>,
    /// Tests referring to the group; such a group cannot change (EBUSY).
    pub tests: usize,
}

/// `struct lstcon_batch`.
#[derive(Debug)]
pub(crate) struct Batch {
    pub name: String,
    pub id: u64,
    pub state: u32,
    /// `struct lstcon_test` of each test (its `batch` is this batch).
    pub tests: Vec<TestSpec>,
    /// Nodes running client tests, and server tests, in order of addition.
    pub clients: Vec<ProcessId>,
    pub servers: Vec<ProcessId>,
}

/// What a test does, with its parameters (`lst_test_bulk_param`, `lst_test_ping_param`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TestKind {
    Ping,
    Brw(BrwSpec),
}

impl TestKind {
    /// lst's `lst_test_type2name()`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ping => "ping",
            Self::Brw(_) => "brw",
        }
    }
}

/// BRW parameters (`struct lst_test_bulk_param`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BrwSpec {
    pub direction: BrwDirection,
    pub check: BrwCheck,
    /// Bytes per RPC, at most 1 MiB.
    pub size: u32,
    /// The client's offset in its first page, a multiple of 8 (`blk_cli_off`).
    pub offset: u32,
}

impl Default for BrwSpec {
    /// lst's defaults: `brw read size=4096 check=none off=0`.
    fn default() -> Self {
        Self { direction: BrwDirection::Read, check: BrwCheck::None, size: 4096, offset: 0 }
    }
}

/// A test to add (`lst add_test`'s arguments).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestSpec {
    pub batch: String,
    pub kind: TestKind,
    /// RPCs per client unit; -1 (any negative) runs until stopped.
    pub loop_count: i32,
    /// Outstanding RPCs per client and destination, 1..=1024.
    pub concurrency: u32,
    /// `--distribute D:S`.
    pub distribute: u32,
    pub span: u32,
    pub from: String,
    pub to: String,
}

impl TestSpec {
    /// A test with lst's defaults (`--loop -1 --concurrency 1 --distribute 1:1`, batch
    /// `batch`).
    pub fn new(kind: TestKind, from: &str, to: &str) -> Self {
        Self {
            batch: DEFAULT_BATCH.to_string(),
            kind,
            loop_count: -1,
            concurrency: 1,
            distribute: 1,
            span: 1,
            from: from.to_string(),
            to: to.to_string(),
        }
    }
}

/// Counts of nodes by state (`struct lstcon_ndlist_ent`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct NodeCounts {
    pub total: u32,
    pub active: u32,
    pub busy: u32,
    pub down: u32,
    pub unknown: u32,
}

impl NodeCounts {
    pub fn count(&mut self, state: NodeState) {
        match state {
            NodeState::Active => self.active += 1,
            NodeState::Busy => self.busy += 1,
            NodeState::Down => self.down += 1,
            NodeState::Unknown => self.unknown += 1,
        }
        self.total += 1;
    }
}

/// `lstcon_dstnodes_prep()`: the destinations of client number `index`: `span` consecutive
/// servers starting at `((index / distribute) * span) mod nservers`, wrapping around.
/// `None` when `span` exceeds the servers (EINVAL).
pub(crate) fn destinations(
    servers: &[ProcessId],
    index: usize,
    distribute: usize,
    span: usize,
) -> Option<Vec<ProcessId>> {
    let count = servers.len();
    if span > count || count == 0 || distribute == 0 {
        return None;
    }
    let start = ((index / distribute) * span) % count;
    Some((0..span).filter_map(|offset| servers.get((start + offset) % count).copied()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ulnet::Nid;

    fn nodes(count: u32) -> Vec<ProcessId> {
        (1..=count)
            .map(|i| ProcessId::lustre(Nid::ipv4(ulnet::Net::TCP, [10, 0, 0, i as u8].into())))
            .collect()
    }

    #[test]
    fn distribution_round_robin_and_spans() {
        let servers = nodes(4);
        // 1:1 round-robin.
        assert_eq!(destinations(&servers, 0, 1, 1), Some(vec![servers[0]]));
        assert_eq!(destinations(&servers, 5, 1, 1), Some(vec![servers[1]]));
        // 2:3: clients 0 and 1 share servers 0..3, client 2 starts at 3 and wraps.
        assert_eq!(destinations(&servers, 1, 2, 3), Some(servers[0..3].to_vec()));
        assert_eq!(destinations(&servers, 2, 2, 3), Some(vec![servers[3], servers[0], servers[1]]));
        // 1:n: everyone talks to all servers.
        assert_eq!(destinations(&servers, 7, 1, 4).map(|d| d.len()), Some(4));
    }

    #[test]
    fn distribution_refuses_a_span_beyond_the_servers() {
        assert_eq!(destinations(&nodes(2), 0, 1, 3), None);
    }

    #[test]
    fn features_are_fixed_by_the_first_answer() {
        let mut session = Session {
            name: String::new(),
            key: 1,
            features: 1,
            features_updated: false,
            timeout_seconds: 300,
            force: false,
            id: SessionId::NONE,
            last_used: Instant::now(),
            expired: false,
            batch_cookie: 0,
            next_ping: Instant::now(),
        };
        assert_eq!(session.features_check(0), 0);
        assert_eq!(session.features, 0);
        assert_eq!(session.features_check(1), errno::EPROTO);
        assert_eq!(session.features_check(2), errno::EPROTO);
    }
}
