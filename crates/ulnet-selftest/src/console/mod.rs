//! The console: what `lst` asks the kernel's console to do, as a library driving any
//! [`ulnet::Node`]. It keeps the session, groups, batches and tests, talks to test nodes
//! with selftest RPCs, pings idle nodes, and ends the session when left idle.
//!
//! Every operation but [`Console::new_session`] and [`Console::session_info`] takes the
//! session key (`LST_SESSION`), as the kernel's ioctls do. Errors are the kernel's errnos
//! ([`ConsoleError::errno`]), so a front end can print lst's messages.
//!
//! lustre: lnet/selftest/console.c, conrpc.c, conctl.c.

mod model;
mod trans;

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant};

use ulnet::proto::wire::selftest::{
    BatchId, BatchRequest, BrwCheck, BrwDirection, DebugRequest, LST_FEAT_BULK_LEN, LST_FEATS_MASK,
    LST_MAX_CONCUR, LST_NAME_SIZE, LstName, MakeSessionRequest, PAGE_SIZE_4K, ProcessIdPacked,
    RemoveSessionRequest, SRPC_BATCH_OPC_QUERY, SRPC_BATCH_OPC_RUN, SRPC_BATCH_OPC_STOP, SessionId,
    SrpcBody, SrpcMsg, SrpcService, StatRequest, TestParams, TestRequest, encode_dest_list,
};
use ulnet::{Memory, Node, ProcessId};

use crate::ext::{LatencyQuery, REQUEST_TAIL, ULNET_DEBUG_PROBE};
use crate::srpc::{
    App, ClientBulk, ClientCall, ClientOutcome, Endpoint, Incoming, RpcCore, RpcError, State,
    Verdict,
};

pub use model::{
    BATCH_IDLE, BATCH_RUNNING, BrwSpec, CONSOLE_TIMEOUT_SECONDS, DEFAULT_BATCH, NodeCounts,
    NodeState, TestKind, TestSpec,
};
pub use trans::{
    RpcEntry, TRANS_MIN_TIMEOUT_SECONDS, TRANS_TIMEOUT_SECONDS, TransResult, TransStat,
};

use model::{Batch, Group, NodeEntry, Session};
use trans::{Call, TransOp, Transactions};

/// `LST_PING_INTERVAL`: how often the console looks for idle nodes to ping.
const PING_INTERVAL: Duration = Duration::from_secs(8);

/// A console operation failed locally; the kernel's errno for each (lst prints them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConsoleError {
    /// ESRCH.
    #[error("no session exists")]
    NoSession,
    /// ESHUTDOWN.
    #[error("the session is shutting down")]
    ShuttingDown,
    /// EACCES: `LST_SESSION` is not the session's key.
    #[error("unmatched session key")]
    KeyMismatch,
    /// ENOENT: no such group, batch, test or node.
    #[error("not found")]
    NotFound,
    /// EINVAL.
    #[error("invalid parameters")]
    Invalid,
    /// EEXIST.
    #[error("already exists")]
    Exists,
    /// EBUSY: the group is used by a test.
    #[error("busy")]
    Busy,
    /// E2BIG: a name of 32 bytes or more.
    #[error("name too long")]
    NameTooLong,
    /// ENETDOWN: a node the operation needs is not active.
    #[error("a node is not active")]
    NodeNotActive,
    /// EPERM: two operations on one object at once.
    #[error("operation in progress")]
    InProgress,
    /// ENOMEM.
    #[error("out of resources")]
    NoResources,
}

impl ConsoleError {
    /// The positive errno (`lst_print_error()` switches on it).
    pub fn errno(self) -> i32 {
        match self {
            Self::NoSession => 3,
            Self::ShuttingDown => 108,
            Self::KeyMismatch => 13,
            Self::NotFound => 2,
            Self::Invalid => 22,
            Self::Exists => 17,
            Self::Busy => 16,
            Self::NameTooLong => 7,
            Self::NodeNotActive => 100,
            Self::InProgress => 1,
            Self::NoResources => 12,
        }
    }
}

/// What `show_session` reports.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SessionInfo {
    pub name: String,
    pub key: u32,
    pub features: u32,
    /// The console's nid4 and the session stamp.
    pub nid: u64,
    pub stamp: i64,
    pub timeout_seconds: u32,
    pub force: bool,
    /// Nodes the session knows.
    pub nodes: usize,
}

/// Which nodes an operation targets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Session,
    Group(String),
    /// A batch's client nodes, or its servers.
    Batch {
        name: String,
        server: bool,
    },
    Nodes(Vec<ProcessId>),
}

/// What `list_batch` shows about a batch or one of its tests (`lstcon_test_batch_ent`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct BatchInfo {
    pub clients: NodeCounts,
    pub servers: NodeCounts,
    /// For a batch: its test count and state ([`BATCH_IDLE`] or [`BATCH_RUNNING`]).
    pub tests: u32,
    pub state: u32,
    /// For a test: its kind, loop and concurrency.
    pub test: Option<(&'static str, i32, u32)>,
}

/// How `update_group` changes a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupUpdate {
    /// Invite the group's inactive nodes again.
    Refresh,
    /// Drop the nodes in any of these states (`LST_NODE_*` bits).
    Clean(u32),
    /// End the session on these nodes and drop them.
    Remove(Vec<ProcessId>),
}

/// An lst console on a node.
///
/// ```
/// use ulnet::{LinkConfig, MemFabric, Node};
/// use ulnet_selftest::{Console, SelftestService};
///
/// let fabric = MemFabric::new(LinkConfig::IDEAL);
/// let server = Node::builder().mem_ni("10.0.0.1@tcp".parse().unwrap(), &fabric).build().unwrap();
/// let _service = SelftestService::start(&server).unwrap();
/// let me = Node::builder().mem_ni("10.0.0.9@tcp".parse().unwrap(), &fabric).build().unwrap();
/// let console = Console::new(&me).unwrap();
/// console.new_session(7, "demo", 0, false, 1).unwrap();
/// console.add_group(7, "servers").unwrap();
/// let ids = vec![ulnet::ProcessId::lustre("10.0.0.1@tcp".parse().unwrap())];
/// let added = console.add_nodes(7, "servers", &ids).unwrap();
/// assert_eq!(added.lst_rc(), 0);
/// console.end_session(7).unwrap();
/// ```
pub struct Console {
    endpoint: Endpoint<ConsoleApp>,
}

impl fmt::Debug for Console {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Console").finish_non_exhaustive()
    }
}

impl Console {
    /// A console on `node`; its session ids carry the node's first network NID.
    pub fn new(node: &Node) -> Result<Self, crate::StartError> {
        let app = ConsoleApp::new(node.process_id());
        let endpoint = Endpoint::start(node, "console", app, |_| Ok(()))?;
        Ok(Self { endpoint })
    }

    /// `lstcon_session_new()`: a new session named `name` with key `key`. `timeout_seconds`
    /// of 0 means the default (300 s). With `force`, an existing session is ended first.
    pub fn new_session(
        &self,
        key: u32,
        name: &str,
        timeout_seconds: u32,
        force: bool,
        features: u32,
    ) -> Result<SessionInfo, ConsoleError> {
        let exists = self.endpoint.with(|state| {
            state.app.touch();
            state.app.session.is_some()
        });
        if exists {
            if !force {
                return Err(ConsoleError::Exists);
            }
            self.end_session_unchecked();
        }
        if features & !LST_FEATS_MASK != 0 {
            return Err(ConsoleError::Invalid);
        }
        if name.len() >= LST_NAME_SIZE {
            return Err(ConsoleError::NameTooLong);
        }
        self.endpoint.with(|state| {
            let app = &mut state.app;
            let nid = app.console.nid.to_nid4().ok_or(ConsoleError::Invalid)?;
            let now = Instant::now();
            let mut session = Session {
                name: name.to_string(),
                key,
                features,
                features_updated: false,
                timeout_seconds: if timeout_seconds == 0 {
                    CONSOLE_TIMEOUT_SECONDS
                } else {
                    timeout_seconds
                },
                force,
                id: SessionId { nid, stamp: monotonic_millis() },
                last_used: now,
                expired: false,
                batch_cookie: 0,
                next_ping: now + PING_INTERVAL,
            };
            session.batch_cookie += 1;
            app.batches.push(Batch {
                name: DEFAULT_BATCH.to_string(),
                id: session.batch_cookie,
                state: BATCH_IDLE,
                tests: Vec::new(),
                clients: Vec::new(),
                servers: Vec::new(),
            });
            app.session = Some(session);
            Ok(app.info())
        })
    }

    /// `lstcon_session_end()`: REMOVE_SESSION to every active node, then everything goes.
    pub fn end_session(&self, key: u32) -> Result<TransResult, ConsoleError> {
        self.in_session(key, |_| Ok(()))?;
        Ok(self.end_session_unchecked())
    }

    /// The session's description (`show_session`).
    pub fn session_info(&self) -> Result<SessionInfo, ConsoleError> {
        self.endpoint.with(|state| {
            state.app.touch();
            if state.app.session.as_ref().is_some_and(|session| session.expired) {
                return Err(ConsoleError::NoSession);
            }
            state.app.session.as_ref().map(|_| state.app.info()).ok_or(ConsoleError::NoSession)
        })
    }

    /// `lstcon_*_debug()`: a DEBUG RPC to each targeted node (`lst ping`).
    pub fn debug(
        &self,
        key: u32,
        target: &Target,
        timeout_seconds: u32,
    ) -> Result<TransResult, ConsoleError> {
        let (nodes, calls) = self.target_calls(key, target, true, ConsoleApp::debug_call)?;
        let result = self.transact(TransOp::SessionQuery, calls, clamp_timeout(timeout_seconds));
        self.endpoint.with(|state| state.app.release_temporary(target, &nodes));
        Ok(result)
    }

    /// `lstcon_group_add()`: an empty group.
    pub fn add_group(&self, key: u32, name: &str) -> Result<(), ConsoleError> {
        self.in_session(key, |app| {
            check_name(name)?;
            if app.group(name).is_some() {
                return Err(ConsoleError::Exists);
            }
            app.groups.push(Group { name: name.to_string(), nodes: Vec::new(), tests: 0 });
            Ok(())
        })
    }

    /// `lstcon_nodes_add()`: nodes join the group and are invited into the session
    /// (MAKE_SESSION to the ones not active yet). The result's `features` are what the
    /// nodes agreed on.
    #[expect(
        clippy::indexing_slicing,
        reason = "group indexes come from group_index() on the same vector, under the endpoint lock"
    )]
    pub fn add_nodes(
        &self,
        key: u32,
        group: &str,
        ids: &[ProcessId],
    ) -> Result<TransResult, ConsoleError> {
        if ids.is_empty() {
            return Err(ConsoleError::Invalid);
        }
        let (fresh, calls) = self.in_session(key, |app| {
            let index = app.idle_group_index(group)?;
            let mut fresh = Vec::new();
            for id in ids {
                if app.groups[index].nodes.contains(id) || fresh.contains(id) {
                    continue;
                }
                fresh.push(*id);
            }
            for id in &fresh {
                app.node_ref(*id);
            }
            let calls = fresh
                .iter()
                .filter(|id| app.state_of(**id) != NodeState::Active)
                .map(|id| app.session_call(*id, true))
                .collect::<Vec<_>>();
            Ok((fresh, calls))
        })?;
        let result = self.transact(TransOp::SessionNew, calls, TRANS_TIMEOUT_SECONDS);
        self.endpoint.with(|state| {
            if let Ok(index) = state.app.group_index(group) {
                state.app.groups[index].nodes.extend(fresh.iter().copied());
            } else {
                for id in &fresh {
                    state.app.node_unref(*id);
                }
            }
        });
        Ok(result)
    }

    /// `lstcon_group_del()`: REMOVE_SESSION to the group's active nodes used by no other
    /// group or batch, then the group goes.
    pub fn del_group(&self, key: u32, name: &str) -> Result<TransResult, ConsoleError> {
        let (nodes, calls) = self.in_session(key, |app| {
            let index = app.idle_group_index(name)?;
            let group = app.groups.remove(index);
            let calls = app.end_session_calls(&group.nodes);
            Ok((group.nodes, calls))
        })?;
        let result = self.transact(TransOp::SessionEnd, calls, TRANS_TIMEOUT_SECONDS);
        self.unref_nodes(&nodes);
        Ok(result)
    }

    /// `lstcon_group_refresh/clean()`, `lstcon_nodes_remove()`.
    #[expect(
        clippy::indexing_slicing,
        reason = "group indexes come from group_index() on the same vector, under the endpoint lock"
    )]
    pub fn update_group(
        &self,
        key: u32,
        name: &str,
        update: &GroupUpdate,
    ) -> Result<TransResult, ConsoleError> {
        match update {
            GroupUpdate::Clean(states) => self.in_session(key, |app| {
                let index = app.idle_group_index(name)?;
                let keep = 0xF & !states;
                let (kept, dropped): (Vec<ProcessId>, Vec<ProcessId>) = app.groups[index]
                    .nodes
                    .iter()
                    .partition(|id| app.state_of(**id).flag() & keep != 0);
                app.groups[index].nodes = kept;
                for id in dropped {
                    app.node_unref(id);
                }
                if app.groups[index].nodes.is_empty() {
                    app.groups.remove(index);
                }
                Ok(TransResult::default())
            }),
            GroupUpdate::Refresh => {
                let calls = self.in_session(key, |app| {
                    let index = app.idle_group_index(name)?;
                    let nodes = app.groups[index].nodes.clone();
                    Ok(nodes
                        .iter()
                        .filter(|id| app.state_of(**id) != NodeState::Active)
                        .map(|id| app.session_call(*id, true))
                        .collect::<Vec<_>>())
                })?;
                Ok(self.transact(TransOp::SessionNew, calls, TRANS_TIMEOUT_SECONDS))
            }
            GroupUpdate::Remove(ids) => {
                if ids.is_empty() {
                    return Err(ConsoleError::Invalid);
                }
                let (removed, calls) = self.in_session(key, |app| {
                    let index = app.idle_group_index(name)?;
                    let removed: Vec<ProcessId> = app.groups[index]
                        .nodes
                        .iter()
                        .filter(|id| ids.contains(id))
                        .copied()
                        .collect();
                    app.groups[index].nodes.retain(|id| !ids.contains(id));
                    let calls = app.end_session_calls(&removed);
                    if app.groups[index].nodes.is_empty() {
                        app.groups.remove(index);
                    }
                    Ok((removed, calls))
                })?;
                let result = self.transact(TransOp::SessionEnd, calls, TRANS_TIMEOUT_SECONDS);
                self.unref_nodes(&removed);
                Ok(result)
            }
        }
    }

    /// Group names in creation order.
    pub fn groups(&self, key: u32) -> Result<Vec<String>, ConsoleError> {
        self.in_session(key, |app| Ok(app.groups.iter().map(|group| group.name.clone()).collect()))
    }

    /// A group's nodes with their states, in the group's order.
    #[expect(
        clippy::indexing_slicing,
        reason = "group indexes come from group_index() on the same vector, under the endpoint lock"
    )]
    pub fn group_nodes(
        &self,
        key: u32,
        name: &str,
    ) -> Result<Vec<(ProcessId, NodeState)>, ConsoleError> {
        self.in_session(key, |app| {
            let index = app.group_index(name)?;
            Ok(app.groups[index].nodes.iter().map(|id| (*id, app.state_of(*id))).collect())
        })
    }

    /// `lstcon_batch_add()`.
    pub fn add_batch(&self, key: u32, name: &str) -> Result<(), ConsoleError> {
        self.in_session(key, |app| {
            check_name(name)?;
            if app.batch(name).is_some() {
                return Err(ConsoleError::Exists);
            }
            let id = app.session.as_mut().map_or(0, |session| {
                session.batch_cookie += 1;
                session.batch_cookie
            });
            app.batches.push(Batch {
                name: name.to_string(),
                id,
                state: BATCH_IDLE,
                tests: Vec::new(),
                clients: Vec::new(),
                servers: Vec::new(),
            });
            Ok(())
        })
    }

    /// Batch names in creation order.
    pub fn batches(&self, key: u32) -> Result<Vec<String>, ConsoleError> {
        self.in_session(key, |app| Ok(app.batches.iter().map(|batch| batch.name.clone()).collect()))
    }

    /// `lstcon_batch_info()`: a batch (`test` 0) or one of its tests (1-based).
    pub fn batch_info(&self, key: u32, name: &str, test: u32) -> Result<BatchInfo, ConsoleError> {
        self.in_session(key, |app| {
            let (clients, servers, info_test) = app.batch_lists(name, test)?;
            let mut info = BatchInfo {
                clients: NodeCounts::default(),
                servers: NodeCounts::default(),
                tests: 0,
                state: BATCH_IDLE,
                test: info_test,
            };
            for id in clients {
                info.clients.count(app.state_of(id));
            }
            for id in servers {
                info.servers.count(app.state_of(id));
            }
            if let Some(batch) = app.batch(name) {
                info.tests = batch.tests.len() as u32;
                info.state = batch.state;
            }
            Ok(info)
        })
    }

    /// The nodes of a batch or test (clients, or servers with `server`) and their states.
    pub fn batch_nodes(
        &self,
        key: u32,
        name: &str,
        test: u32,
        server: bool,
    ) -> Result<Vec<(ProcessId, NodeState)>, ConsoleError> {
        self.in_session(key, |app| {
            let (clients, servers, _) = app.batch_lists(name, test)?;
            let list = if server { servers } else { clients };
            Ok(list.into_iter().map(|id| (id, app.state_of(id))).collect())
        })
    }

    /// `lstcon_test_add()`: TEST RPCs to the servers (the `to` group), then to the clients
    /// (the `from` group) with their destination lists. The test joins the batch even when
    /// some nodes failed (so `list_batch` shows what happened), as in the kernel.
    pub fn add_test(&self, key: u32, spec: &TestSpec) -> Result<TransResult, ConsoleError> {
        if spec.loop_count == 0
            || spec.concurrency == 0
            || spec.concurrency > LST_MAX_CONCUR
            || spec.distribute == 0
            || spec.span == 0
        {
            return Err(ConsoleError::Invalid);
        }
        if let TestKind::Brw(brw) = spec.kind {
            if brw.size as usize > crate::service::LNET_MTU || brw.offset % 8 != 0 {
                return Err(ConsoleError::Invalid);
            }
        }
        let test = spec.clone();
        // Servers first.
        let (batch_id, features, calls) = self.in_session(key, |app| {
            let batch = app.batch(&spec.batch).ok_or(ConsoleError::NotFound)?;
            if batch.state != BATCH_IDLE {
                return Err(ConsoleError::Invalid);
            }
            let batch_id = batch.id;
            app.verify_group(&spec.from)?;
            app.verify_group(&spec.to)?;
            let features = app.features();
            let calls = app.test_calls(&test, batch_id, features, false)?;
            Ok((batch_id, features, calls))
        })?;
        let mut result = self.transact(TransOp::TestServerAdd, calls, TRANS_TIMEOUT_SECONDS);
        if result.lst_rc() == 0 {
            let calls = self
                .endpoint
                .with(|state| state.app.test_calls(&test, batch_id, features, true))?;
            result = self.transact(TransOp::TestClientAdd, calls, TRANS_TIMEOUT_SECONDS);
        }
        self.endpoint.with(|state| {
            let app = &mut state.app;
            for name in [&test.from, &test.to] {
                if let Some(group) = app.groups.iter_mut().find(|group| &group.name == name) {
                    group.tests += 1;
                }
            }
            if let Some(batch) = app.batches.iter_mut().find(|batch| batch.id == batch_id) {
                batch.tests.push(test);
            }
        });
        Ok(result)
    }

    /// `lstcon_batch_run()`: BATCH RUN to the batch's clients. `timeout` is passed as the
    /// kernel passes it (nodes ignore it).
    pub fn run_batch(
        &self,
        key: u32,
        name: &str,
        timeout: u32,
    ) -> Result<TransResult, ConsoleError> {
        let result =
            self.batch_op(key, name, TransOp::BatchRun, timeout, 0, TRANS_TIMEOUT_SECONDS)?;
        self.set_batch_state(name, result.stat.op_success() != 0, BATCH_RUNNING);
        Ok(result)
    }

    /// `lstcon_batch_stop()`: BATCH STOP to the batch's active clients.
    pub fn stop_batch(
        &self,
        key: u32,
        name: &str,
        force: bool,
    ) -> Result<TransResult, ConsoleError> {
        let result = self.batch_op(
            key,
            name,
            TransOp::BatchStop,
            u32::from(force),
            0,
            TRANS_TIMEOUT_SECONDS,
        )?;
        self.set_batch_state(name, result.stat.op_failure() == 0, BATCH_IDLE);
        Ok(result)
    }

    /// `lstcon_test_batch_query()`: BATCH QUERY to the batch's (or test's) clients.
    pub fn query_batch(
        &self,
        key: u32,
        name: &str,
        test: u32,
        server: bool,
        timeout_seconds: u32,
    ) -> Result<TransResult, ConsoleError> {
        let op = if server { TransOp::BatchServerQuery } else { TransOp::BatchClientQuery };
        let result = self.batch_op(key, name, op, 0, test, timeout_seconds)?;
        self.set_batch_state(
            name,
            test == 0 && result.stat.rpc_failure == 0 && result.stat.batch_running() == 0,
            BATCH_IDLE,
        );
        Ok(result)
    }

    /// `lstcon_group_stat()` / `lstcon_nodes_stat()`: QUERY_STAT to a group's nodes, or to
    /// nodes of the session.
    pub fn stat(
        &self,
        key: u32,
        target: &Target,
        timeout_seconds: u32,
    ) -> Result<TransResult, ConsoleError> {
        let (_, calls) = self.target_calls(key, target, false, ConsoleApp::stat_call)?;
        Ok(self.transact(TransOp::StatQuery, calls, clamp_timeout(timeout_seconds)))
    }

    /// For tests: run the pinger as if `at` had come.
    #[doc(hidden)]
    pub fn tick_at(&self, at: Instant) {
        self.endpoint.with(|state| {
            let State { core, app, .. } = state;
            app.pinger(core, at);
        });
    }

    // ------------------------------------------------------------------ internals

    fn batch_op(
        &self,
        key: u32,
        name: &str,
        op: TransOp,
        arg: u32,
        test: u32,
        timeout_seconds: u32,
    ) -> Result<TransResult, ConsoleError> {
        let calls = self.in_session(key, |app| {
            let (clients, _, _) = app.batch_lists(name, test)?;
            let batch_id = app.batch(name).map_or(0, |batch| batch.id);
            let features = app.features();
            let session = app.session_id();
            let opcode = match op {
                TransOp::BatchRun => SRPC_BATCH_OPC_RUN,
                TransOp::BatchStop => SRPC_BATCH_OPC_STOP,
                _ => SRPC_BATCH_OPC_QUERY,
            };
            let mut calls = Vec::new();
            for id in clients {
                // lustre: console.c `lstcon_batrpc_condition()`.
                let active = app.state_of(id) == NodeState::Active;
                match op {
                    TransOp::BatchRun if !active => return Err(ConsoleError::NodeNotActive),
                    TransOp::BatchStop if !active => continue,
                    _ => {}
                }
                calls.push(Call {
                    node: id,
                    service: SrpcService::Batch,
                    request: SrpcMsg::new(
                        features,
                        SrpcBody::BatchRequest(BatchRequest {
                            reply_match_bits: 0,
                            session,
                            batch: BatchId(batch_id),
                            opcode,
                            test_index: test,
                            arg,
                        }),
                    ),
                    bulk: None,
                    tail: None,
                });
            }
            Ok(calls)
        })?;
        let timeout = if matches!(op, TransOp::BatchRun | TransOp::BatchStop) {
            timeout_seconds
        } else {
            timeout_seconds.max(TRANS_MIN_TIMEOUT_SECONDS)
        };
        Ok(self.transact(op, calls, timeout))
    }

    /// Runs `f` on the console's state once `key` names its session (`lstcon_session_*`'s
    /// key check).
    fn in_session<T>(
        &self,
        key: u32,
        f: impl FnOnce(&mut ConsoleApp) -> Result<T, ConsoleError>,
    ) -> Result<T, ConsoleError> {
        self.endpoint.with(|state| {
            state.app.enter(key)?;
            f(&mut state.app)
        })
    }

    /// The nodes `target` names in the session `key` (see [`ConsoleApp::target_nodes`] for
    /// `create`), and one `call` to each.
    fn target_calls(
        &self,
        key: u32,
        target: &Target,
        create: bool,
        call: fn(&ConsoleApp, ProcessId) -> Call,
    ) -> Result<(Vec<ProcessId>, Vec<Call>), ConsoleError> {
        self.in_session(key, |app| {
            let nodes = app.target_nodes(target, create)?;
            let calls = nodes.iter().map(|id| call(app, *id)).collect();
            Ok((nodes, calls))
        })
    }

    /// Records the batch's `state` when its RPCs' results say it `changed`.
    fn set_batch_state(&self, name: &str, changed: bool, state: u32) {
        self.endpoint.with(|locked| {
            if changed {
                if let Some(batch) = locked.app.batch_mut(name) {
                    batch.state = state;
                }
            }
        });
    }

    /// Drops the references to `nodes` a removed group held, once the RPCs to them are done.
    fn unref_nodes(&self, nodes: &[ProcessId]) {
        self.endpoint.with(|state| {
            for id in nodes {
                state.app.node_unref(*id);
            }
        });
    }

    /// `lstcon_rpc_trans_postwait()` and the interpretation that follows.
    fn transact(&self, op: TransOp, calls: Vec<Call>, timeout_seconds: u32) -> TransResult {
        if calls.is_empty() {
            return TransResult {
                features: self.endpoint.with(|state| state.app.features()),
                ..TransResult::default()
            };
        }
        let timeout = timeout_seconds.max(TRANS_MIN_TIMEOUT_SECONDS);
        let id = self.endpoint.with(|state| {
            let State { core, app, .. } = state;
            let features = app.features();
            app.trans.start(core, op, features, calls)
        });
        let deadline = Instant::now() + Duration::from_secs(u64::from(timeout));
        let done = |state: &mut State<ConsoleApp>| state.app.trans.is_done(id);
        self.endpoint.wait_until(deadline, done, |state, finished| {
            let State { core, app, .. } = state;
            if !finished {
                // lustre: a short timeout counts as cancelled rather than timed out.
                let error = if timeout < TRANS_MIN_TIMEOUT_SECONDS * 2 {
                    RpcError::Interrupted
                } else {
                    RpcError::TimedOut
                };
                app.trans.abort(core, id, error, &mut app.nodes);
            }
            let ConsoleApp { trans, session, nodes, .. } = app;
            match session.as_mut() {
                Some(session) => trans.finish(id, session, nodes),
                None => {
                    let mut scratch = Session::scratch();
                    trans.finish(id, &mut scratch, nodes)
                }
            }
        })
    }

    fn end_session_unchecked(&self) -> TransResult {
        let calls = self.endpoint.with(|state| {
            let app = &mut state.app;
            app.shutting_down = true;
            let mut active: Vec<(u64, ProcessId)> = app
                .nodes
                .iter()
                .filter(|(_, node)| node.state == NodeState::Active)
                .map(|(id, node)| (node.order, *id))
                .collect();
            active.sort_by_key(|(order, _)| *order);
            active.into_iter().map(|(_, id)| app.session_call(id, false)).collect::<Vec<_>>()
        });
        let result = self.transact(TransOp::SessionEnd, calls, TRANS_TIMEOUT_SECONDS);
        self.endpoint.with(|state| state.app.clear());
        result
    }
}

/// The console's application state on its endpoint.
#[derive(Debug)]
pub(crate) struct ConsoleApp {
    console: ProcessId,
    session: Option<Session>,
    nodes: HashMap<ProcessId, NodeEntry>,
    next_order: u64,
    groups: Vec<Group>,
    batches: Vec<Batch>,
    trans: Transactions,
    shutting_down: bool,
    /// Pinger RPCs out: tag → node.
    pings: HashMap<u64, ProcessId>,
    next_ping_tag: u64,
}

impl ConsoleApp {
    fn new(console: ProcessId) -> Self {
        Self {
            console,
            session: None,
            nodes: HashMap::new(),
            next_order: 0,
            groups: Vec::new(),
            batches: Vec::new(),
            trans: Transactions::default(),
            shutting_down: false,
            pings: HashMap::new(),
            next_ping_tag: 1,
        }
    }

    fn touch(&mut self) {
        if let Some(session) = self.session.as_mut() {
            session.last_used = Instant::now();
        }
    }

    /// The checks every keyed operation makes (`lstcon_ioctl_entry()`).
    fn enter(&mut self, key: u32) -> Result<(), ConsoleError> {
        self.touch();
        if self.shutting_down {
            return Err(ConsoleError::ShuttingDown);
        }
        let Some(session) = self.session.as_ref() else { return Err(ConsoleError::NoSession) };
        if session.expired {
            self.clear();
            return Err(ConsoleError::NoSession);
        }
        if session.key != key {
            return Err(ConsoleError::KeyMismatch);
        }
        Ok(())
    }

    fn info(&self) -> SessionInfo {
        let session = self.session.as_ref();
        SessionInfo {
            name: session.map(|s| s.name.clone()).unwrap_or_default(),
            key: session.map_or(0, |s| s.key),
            features: session.map_or(LST_FEATS_MASK, |s| s.features),
            nid: session.map_or(u64::MAX, |s| s.id.nid),
            stamp: session.map_or(-1, |s| s.id.stamp),
            timeout_seconds: session.map_or(0, |s| s.timeout_seconds),
            force: session.is_some_and(|s| s.force),
            nodes: self.nodes.len(),
        }
    }

    fn features(&self) -> u32 {
        self.session.as_ref().map_or(LST_FEATS_MASK, |session| session.features)
    }

    fn session_id(&self) -> SessionId {
        self.session.as_ref().map_or(SessionId::NONE, |session| session.id)
    }

    /// Everything goes: the session, nodes, groups, batches, transactions.
    fn clear(&mut self) {
        self.session = None;
        self.nodes.clear();
        self.groups.clear();
        self.batches.clear();
        self.pings.clear();
        self.shutting_down = false;
    }

    fn state_of(&self, id: ProcessId) -> NodeState {
        self.nodes.get(&id).map_or(NodeState::Unknown, |node| node.state)
    }

    /// `lstcon_node_find(create)`.
    fn node_ref(&mut self, id: ProcessId) {
        let order = self.next_order;
        let node = self.nodes.entry(id).or_insert_with(|| NodeEntry {
            state: NodeState::Unknown,
            stamp: Instant::now(),
            timeout_seconds: 0,
            refs: 0,
            order,
            pinging: false,
        });
        if node.order == order {
            self.next_order += 1;
        }
        node.refs += 1;
    }

    /// `lstcon_node_put()`.
    fn node_unref(&mut self, id: ProcessId) {
        if let Some(node) = self.nodes.get_mut(&id) {
            node.refs = node.refs.saturating_sub(1);
            if node.refs == 0 {
                self.nodes.remove(&id);
            }
        }
    }

    fn group(&self, name: &str) -> Option<&Group> {
        self.groups.iter().find(|group| group.name == name)
    }

    /// [`Self::group_index`] of a group no test uses: `Busy` while one does.
    fn idle_group_index(&self, name: &str) -> Result<usize, ConsoleError> {
        let index = self.group_index(name)?;
        if self.groups.get(index).is_some_and(|group| group.tests > 0) {
            return Err(ConsoleError::Busy);
        }
        Ok(index)
    }

    /// REMOVE_SESSION to those of `nodes` that are active and held by nothing but the group
    /// they leave.
    fn end_session_calls(&self, nodes: &[ProcessId]) -> Vec<Call> {
        nodes
            .iter()
            .filter(|id| {
                self.nodes
                    .get(id)
                    .is_some_and(|node| node.state == NodeState::Active && node.refs <= 1)
            })
            .map(|id| self.session_call(*id, false))
            .collect()
    }

    /// The group's index in `groups`. Callers index with it at once, under the same lock and
    /// before `groups` changes, so the index is in bounds.
    fn group_index(&self, name: &str) -> Result<usize, ConsoleError> {
        self.groups.iter().position(|group| group.name == name).ok_or(ConsoleError::NotFound)
    }

    fn batch(&self, name: &str) -> Option<&Batch> {
        self.batches.iter().find(|batch| batch.name == name)
    }

    fn batch_mut(&mut self, name: &str) -> Option<&mut Batch> {
        self.batches.iter_mut().find(|batch| batch.name == name)
    }

    /// `lstcon_verify_group()`: the group exists and has an active node.
    fn verify_group(&self, name: &str) -> Result<(), ConsoleError> {
        let group = self.group(name).ok_or(ConsoleError::NotFound)?;
        if group.nodes.iter().any(|id| self.state_of(*id) == NodeState::Active) {
            Ok(())
        } else {
            Err(ConsoleError::Invalid)
        }
    }

    /// A batch's (`test` 0) or test's client and server lists, and the test's summary.
    #[allow(clippy::type_complexity)]
    fn batch_lists(
        &self,
        name: &str,
        test: u32,
    ) -> Result<(Vec<ProcessId>, Vec<ProcessId>, Option<(&'static str, i32, u32)>), ConsoleError>
    {
        let batch = self.batch(name).ok_or(ConsoleError::NotFound)?;
        if test == 0 {
            return Ok((batch.clients.clone(), batch.servers.clone(), None));
        }
        let test = batch.tests.get(test as usize - 1).ok_or(ConsoleError::NotFound)?;
        let nodes = |group: &str| self.group(group).map(|g| g.nodes.clone()).unwrap_or_default();
        Ok((
            nodes(&test.from),
            nodes(&test.to),
            Some((test.kind.name(), test.loop_count, test.concurrency)),
        ))
    }

    /// The nodes an operation on `target` goes to. With `create`, unknown `Nodes` join the
    /// session for the operation (`lstcon_nodes_debug()`); without, they must be known
    /// (`lstcon_nodes_stat()`).
    fn target_nodes(
        &mut self,
        target: &Target,
        create: bool,
    ) -> Result<Vec<ProcessId>, ConsoleError> {
        match target {
            Target::Session => {
                let mut nodes: Vec<(u64, ProcessId)> =
                    self.nodes.iter().map(|(id, node)| (node.order, *id)).collect();
                nodes.sort_by_key(|(order, _)| *order);
                Ok(nodes.into_iter().map(|(_, id)| id).collect())
            }
            Target::Group(name) => {
                Ok(self.group(name).ok_or(ConsoleError::NotFound)?.nodes.clone())
            }
            Target::Batch { name, server } => {
                let batch = self.batch(name).ok_or(ConsoleError::NotFound)?;
                Ok(if *server { batch.servers.clone() } else { batch.clients.clone() })
            }
            Target::Nodes(ids) => {
                let mut out: Vec<ProcessId> = Vec::new();
                for id in ids {
                    if out.contains(id) {
                        continue;
                    }
                    if create {
                        self.node_ref(*id);
                    } else if !self.nodes.contains_key(id) {
                        return Err(ConsoleError::NotFound);
                    }
                    out.push(*id);
                }
                Ok(out)
            }
        }
    }

    /// Drops the temporary references [`target_nodes`](Self::target_nodes) took.
    fn release_temporary(&mut self, target: &Target, nodes: &[ProcessId]) {
        if let Target::Nodes(_) = target {
            for id in nodes {
                self.node_unref(*id);
            }
        }
    }

    fn debug_call(&self, node: ProcessId) -> Call {
        Call {
            node,
            service: SrpcService::Debug,
            request: SrpcMsg::new(
                self.features(),
                SrpcBody::DebugRequest(DebugRequest {
                    reply_match_bits: 0,
                    session: self.session_id(),
                    flags: ULNET_DEBUG_PROBE,
                }),
            ),
            bulk: None,
            tail: Some((REQUEST_TAIL, LatencyQuery::default().emit().to_vec())),
        }
    }

    /// QUERY_STAT for one node (`lstcon_statrpc_prep()`).
    fn stat_call(&self, node: ProcessId) -> Call {
        Call {
            node,
            service: SrpcService::QueryStat,
            request: SrpcMsg::new(
                self.features(),
                SrpcBody::StatRequest(StatRequest {
                    reply_match_bits: 0,
                    session: self.session_id(),
                    stat_type: 0,
                }),
            ),
            bulk: None,
            tail: None,
        }
    }

    /// MAKE_SESSION (`create`) or REMOVE_SESSION for one node (`lstcon_sesrpc_prep()`).
    fn session_call(&self, node: ProcessId, create: bool) -> Call {
        let features = self.features();
        let session = self.session_id();
        let (service, body) = if create {
            let name = self.session.as_ref().map(|s| s.name.as_bytes()).unwrap_or_default();
            (
                SrpcService::MakeSession,
                SrpcBody::MakeSessionRequest(MakeSessionRequest {
                    reply_match_bits: 0,
                    session,
                    force: self.session.as_ref().is_some_and(|s| s.force),
                    name: LstName::new(name).unwrap_or_default(),
                }),
            )
        } else {
            (
                SrpcService::RemoveSession,
                SrpcBody::RemoveSessionRequest(RemoveSessionRequest {
                    reply_match_bits: 0,
                    session,
                }),
            )
        };
        Call { node, service, request: SrpcMsg::new(features, body), bulk: None, tail: None }
    }

    /// `lstcon_testrpc_prep()` for every active node of the test's server (or client) group,
    /// recording them in the batch's lists (`lstcon_testrpc_condition()`).
    fn test_calls(
        &mut self,
        test: &TestSpec,
        batch_id: u64,
        features: u32,
        client: bool,
    ) -> Result<Vec<Call>, ConsoleError> {
        let session = self.session_id();
        let from = self.group(&test.from).ok_or(ConsoleError::NotFound)?.nodes.clone();
        let to = self.group(&test.to).ok_or(ConsoleError::NotFound)?.nodes.clone();
        let group = if client { &from } else { &to };
        let mut calls = Vec::new();
        let mut client_index = 0;
        for id in group.clone() {
            if self.state_of(id) != NodeState::Active {
                return Err(ConsoleError::NodeNotActive);
            }
            let (loop_count, dest_count, bulk) = if client {
                let dests = model::destinations(
                    &to,
                    client_index,
                    test.distribute as usize,
                    test.span as usize,
                )
                .ok_or(ConsoleError::Invalid)?;
                client_index += 1;
                let packed: Vec<ProcessIdPacked> = dests
                    .iter()
                    .map(|dest| ProcessIdPacked { nid: dest.nid.to_nid4_lossy(), pid: dest.pid })
                    .collect();
                let mut list =
                    encode_dest_list(&packed, PAGE_SIZE_4K).map_err(|_| ConsoleError::Invalid)?;
                if features & LST_FEAT_BULK_LEN == 0 {
                    // lustre: conrpc.c: without BULK_LEN the list is whole pages.
                    list.resize(list.len().div_ceil(PAGE_SIZE_4K) * PAGE_SIZE_4K, 0);
                }
                (
                    test.loop_count as u32,
                    test.span,
                    Some(ClientBulk::Source { memory: Memory::new(list) }),
                )
            } else {
                // lustre: conrpc.c: a server expects this many requests at once.
                let clients = from.len() as u32;
                let ndist = clients.div_ceil(test.distribute);
                let nspan = (to.len() as u32).div_ceil(test.span);
                let nmax = ndist.div_ceil(nspan);
                (nmax * test.distribute * test.concurrency, 0, None)
            };
            let params = match test.kind {
                TestKind::Ping => TestParams::Ping { size: 0, flags: 0 },
                TestKind::Brw(brw) if features & LST_FEAT_BULK_LEN == 0 => TestParams::BrwV0 {
                    opcode: brw.direction as u32,
                    page_count: brw.size.div_ceil(PAGE_SIZE_4K as u32),
                    flags: brw.check as u32,
                },
                TestKind::Brw(brw) => TestParams::BrwV1 {
                    opcode: brw.direction as u16,
                    flags: brw.check as u16,
                    length: brw.size,
                    offset: brw.offset,
                },
            };
            let service = match test.kind {
                TestKind::Ping => SrpcService::Ping,
                TestKind::Brw(_) => SrpcService::Brw,
            };
            calls.push(Call {
                node: id,
                service: SrpcService::Test,
                request: SrpcMsg::new(
                    features,
                    SrpcBody::TestRequest(TestRequest {
                        reply_match_bits: 0,
                        bulk_match_bits: 0,
                        session,
                        batch: BatchId(batch_id),
                        service: service.id(),
                        loop_count,
                        concurrency: test.concurrency,
                        is_client: client,
                        stop_on_error: true,
                        dest_count,
                        params,
                    }),
                ),
                bulk,
                tail: None,
            });
            let listed =
                self.batches.iter().find(|batch| batch.id == batch_id).is_some_and(|batch| {
                    if client { batch.clients.contains(&id) } else { batch.servers.contains(&id) }
                });
            if !listed {
                self.node_ref(id);
                if let Some(batch) = self.batches.iter_mut().find(|batch| batch.id == batch_id) {
                    if client {
                        batch.clients.push(id);
                    } else {
                        batch.servers.push(id);
                    }
                }
            }
        }
        Ok(calls)
    }

    /// `lstcon_rpc_pinger()`: DEBUG to active nodes idle for half their timeout; an idle
    /// console ends its session.
    fn pinger(&mut self, core: &mut RpcCore, now: Instant) {
        let Some(session) = self.session.as_mut() else { return };
        if session.expired || self.shutting_down || now < session.next_ping {
            return;
        }
        session.next_ping = now + PING_INTERVAL;
        if now.duration_since(session.last_used)
            > Duration::from_secs(u64::from(session.timeout_seconds))
        {
            session.expired = true;
        }
        let expired = session.expired;
        let mut targets = Vec::new();
        for (id, node) in &self.nodes {
            if node.state != NodeState::Active || node.pinging {
                continue;
            }
            let idle = now.duration_since(node.stamp).as_secs();
            if expired || idle >= u64::from(node.timeout_seconds / 2) {
                targets.push(*id);
            }
        }
        for id in targets {
            let call = if expired { self.session_call(id, false) } else { self.debug_call(id) };
            let tag = trans::tag(
                trans::PINGER,
                (self.next_ping_tag % trans::MAX_TRANSACTION_RPCS as u64) as usize,
            );
            self.next_ping_tag += 1;
            let started = core.start(ClientCall {
                dest: id,
                service: call.service,
                request: call.request,
                bulk: None,
                timeout: Some(Duration::from_secs(u64::from(TRANS_TIMEOUT_SECONDS))),
                tag,
                tail: call.tail,
            });
            if started.is_ok() {
                self.pings.insert(tag, id);
                if let Some(node) = self.nodes.get_mut(&id) {
                    node.pinging = true;
                }
            }
        }
    }

    fn ping_done(&mut self, outcome: ClientOutcome) {
        let Some(id) = self.pings.remove(&outcome.tag) else { return };
        let session = self.session_id();
        let Some(node) = self.nodes.get_mut(&id) else { return };
        node.pinging = false;
        let now = Instant::now();
        if node.stamp > now {
            return;
        }
        node.stamp = now;
        node.state = match (&outcome.status, &outcome.reply) {
            (Ok(()), Some((reply, _))) => match &reply.body {
                SrpcBody::DebugReply(debug) if debug.session.has_any_nid() => NodeState::Unknown,
                SrpcBody::DebugReply(debug) if debug.session == session => NodeState::Active,
                SrpcBody::DebugReply(_) => NodeState::Busy,
                _ => node.state,
            },
            (Err(RpcError::TimedOut), _) => NodeState::Down,
            _ => node.state,
        };
    }
}

impl Session {
    /// A session that is not one, for finishing transactions after an end.
    fn scratch() -> Self {
        let now = Instant::now();
        Self {
            name: String::new(),
            key: 0,
            features: LST_FEATS_MASK,
            features_updated: true,
            timeout_seconds: CONSOLE_TIMEOUT_SECONDS,
            force: false,
            id: SessionId::NONE,
            last_used: now,
            expired: false,
            batch_cookie: 0,
            next_ping: now,
        }
    }
}

impl App for ConsoleApp {
    fn request(&mut self, _core: &mut RpcCore, _incoming: &Incoming) -> Verdict {
        Verdict::Drop
    }

    fn bulk_ready(
        &mut self,
        core: &mut RpcCore,
        _incoming: &Incoming,
        _status: Result<(), RpcError>,
        memory: Option<Memory>,
    ) -> Verdict {
        if let Some(memory) = memory {
            core.recycle(memory);
        }
        Verdict::Drop
    }

    fn client_done(&mut self, core: &mut RpcCore, outcome: ClientOutcome) {
        if trans::untag(outcome.tag).0 == trans::PINGER {
            self.ping_done(outcome);
            return;
        }
        self.trans.rpc_done(core, outcome);
    }

    fn tick(&mut self, core: &mut RpcCore, now: Instant) {
        self.pinger(core, now);
    }
}

/// `LST_VALIDATE_TIMEOUT()`.
fn clamp_timeout(seconds: u32) -> u32 {
    seconds.clamp(TRANS_MIN_TIMEOUT_SECONDS, TRANS_TIMEOUT_SECONDS)
}

fn check_name(name: &str) -> Result<(), ConsoleError> {
    if name.is_empty() || name.contains('\0') {
        return Err(ConsoleError::Invalid);
    }
    if name.len() >= LST_NAME_SIZE {
        return Err(ConsoleError::NameTooLong);
    }
    Ok(())
}

/// Milliseconds of the monotonic clock (time since boot), as `lstcon_new_session_id()`
/// stamps sessions.
fn monotonic_millis() -> i64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    now.tv_sec.saturating_mul(1000).saturating_add(now.tv_nsec / 1_000_000)
}

#[allow(unused_imports)]
use {BrwCheck as _, BrwDirection as _};
