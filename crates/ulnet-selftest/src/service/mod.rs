//! The selftest service every node runs (lnet_selftest's "framework" and test services): test
//! sessions, batches and tests set up by a console, the BRW and PING test servers, and the
//! client side of tests (a node that is a test client runs `loop` × `concurrency` RPCs to
//! each destination and counts errors).
//!
//! Start it on a node with [`SelftestService::start`]; it runs until dropped or
//! [`SelftestService::shutdown`].
//!
//! lustre: lnet/selftest/framework.c, brw_test.c, ping_test.c.

mod brw;
mod framework;
pub mod limits;
mod ping;

use std::fmt;
use std::time::{Duration, Instant};

use ulnet::Node;
use ulnet::proto::wire::selftest::{
    DEFAULT_RPC_TIMEOUT_SECONDS, DEFAULT_SESSION_TIMEOUT_SECONDS, SrpcCounters, SrpcService,
};

use crate::srpc::{
    BufferUsage, DEFAULT_BULK_BUDGET, Endpoint, MAX_TEST_BUFFERS, PartitionBuffers, StartError,
};

pub use framework::TestLatency;

/// `LNET_MTU`: the largest BRW transfer.
pub(crate) const LNET_MTU: usize = 1 << 20;
use framework::Framework;

/// Request buffers each framework service keeps posted (`SFW_FRWK_WI_MIN`).
const FRAMEWORK_BUFFERS: usize = 16;
/// The most a framework service grows to (`SFW_FRWK_WI_MAX`).
const MAX_FRAMEWORK_BUFFERS: usize = 256;
/// Request buffers each test service starts with (`SFW_TEST_WI_MIN`).
const TEST_BUFFERS: usize = 256;

/// How a [`SelftestService`] behaves; the defaults are the kernel module's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServiceConfig {
    /// `session_timeout`: a session with no framework RPC for this long ends (`None`: never).
    pub session_timeout: Option<Duration>,
    /// `rpc_timeout`: a test RPC without its reply for this long is aborted (`None`: never).
    pub rpc_timeout: Option<Duration>,
    /// The bytes of bulk memory (RPCs in progress and spare buffers together) the service may
    /// hold; a bulk past it is refused with `ENOMEM` ([`limits::DEFAULT_BULK_BUDGET`]).
    pub bulk_budget: usize,
}

impl ServiceConfig {
    /// This configuration with a bulk memory budget of `bytes`.
    pub fn with_bulk_budget(self, bytes: usize) -> Self {
        Self { bulk_budget: bytes, ..self }
    }
}

impl Default for ServiceConfig {
    fn default() -> Self {
        Self {
            session_timeout: Some(Duration::from_secs(u64::from(DEFAULT_SESSION_TIMEOUT_SECONDS))),
            rpc_timeout: Some(Duration::from_secs(u64::from(DEFAULT_RPC_TIMEOUT_SECONDS))),
            bulk_budget: DEFAULT_BULK_BUDGET,
        }
    }
}

/// The lnet_selftest service on one node: answers consoles (`lst`, `ulst`) on portals 50, 51
/// and 52, wire-compatible with the kernel module.
///
/// ```
/// use ulnet::Node;
/// use ulnet_selftest::SelftestService;
///
/// let node = Node::loopback().unwrap();
/// let service = SelftestService::start(&node).unwrap();
/// assert!(service.session().is_none());
/// ```
pub struct SelftestService {
    endpoint: Endpoint<Framework>,
}

/// The current session as the service sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSummary {
    pub name: String,
    /// The console's NID (nid4) and stamp.
    pub console_nid: u64,
    pub stamp: i64,
    pub features: u32,
    pub batches: usize,
    pub active_batches: usize,
    pub brw_errors: u32,
    pub ping_errors: u32,
}

impl SelftestService {
    /// Starts the service on `node` with the kernel's defaults: the portals become lazy,
    /// request buffers are posted, and a dispatcher thread starts.
    pub fn start(node: &Node) -> Result<Self, StartError> {
        Self::start_with(node, ServiceConfig::default())
    }

    pub fn start_with(node: &Node, config: ServiceConfig) -> Result<Self, StartError> {
        let framework = Framework::new(config);
        let endpoint = Endpoint::start(node, "selftest", framework, |state| {
            state.core.set_bulk_budget(config.bulk_budget);
            for service in [
                SrpcService::Debug,
                SrpcService::MakeSession,
                SrpcService::RemoveSession,
                SrpcService::Batch,
                SrpcService::Test,
                SrpcService::QueryStat,
                // No kernel handles JOIN on a test node; we take such requests and drop them
                // (the sender sees what a kernel node gives it: no reply).
                SrpcService::Join,
            ] {
                state.core.register(service, FRAMEWORK_BUFFERS, MAX_FRAMEWORK_BUFFERS)?;
            }
            for service in [SrpcService::Brw, SrpcService::Ping] {
                state.core.register(service, TEST_BUFFERS, MAX_TEST_BUFFERS)?;
            }
            Ok(())
        })?;
        Ok(Self { endpoint })
    }

    /// The current session, if any.
    pub fn session(&self) -> Option<SessionSummary> {
        self.endpoint.with(|state| state.app.summary())
    }

    /// `service`'s request buffers by CPU partition of the node (one share for a framework
    /// service): posted, owned, and the requests each partition's buffers took.
    pub fn request_buffers(&self, service: SrpcService) -> Vec<PartitionBuffers> {
        self.endpoint.with(|state| state.core.request_buffers(service))
    }

    /// The RPC counters (`srpc_counters`) QUERY_STAT reports.
    pub fn rpc_counters(&self) -> SrpcCounters {
        self.endpoint.with(|state| state.core.counters())
    }

    /// Latency percentiles of the test RPCs this node ran as a client, per test of the
    /// current session (beyond lnet_selftest).
    pub fn latency(&self) -> Vec<TestLatency> {
        self.endpoint.with(|state| state.app.latency())
    }

    /// How the service's state lock is used: held time and threads that found it held (its
    /// serial section, as the node's core lock is the runtime's).
    pub fn lock_stats(&self) -> crate::EndpointLockStats {
        self.endpoint.lock_stats()
    }

    /// How much bulk memory the service holds, against its budget.
    pub fn buffer_usage(&self) -> BufferUsage {
        self.endpoint.with(|state| state.core.buffer_usage())
    }

    /// For tests: run the buffer pool's idle timer now, as if `at` had come (spare buffers
    /// unused for [`limits::SPARE_IDLE`] before `at` are freed).
    #[doc(hidden)]
    pub fn trim_buffers_at(&self, at: Instant) {
        self.endpoint.with(|state| state.core.trim(at));
    }

    /// Stops the service: the session ends, RPCs are aborted and every buffer is unlinked.
    pub fn shutdown(mut self) {
        self.endpoint.shutdown();
    }

    /// For tests: run the session timer now, as if `at` had come.
    #[doc(hidden)]
    pub fn expire_at(&self, at: Instant) {
        self.endpoint.with(|state| {
            let crate::srpc::State { core, app, .. } = state;
            app.expire(core, at);
        });
    }
}

impl fmt::Debug for SelftestService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SelftestService").finish_non_exhaustive()
    }
}
