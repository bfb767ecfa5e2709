//! lnet_selftest in userspace: the selftest service every ulnet node runs
//! ([`SelftestService`]), and the `lst`-compatible console ([`Console`]) behind the `ulst`
//! command.

pub mod cli;
pub mod console;
pub mod ext;
pub mod serve;
mod service;
mod srpc;

pub use console::{Console, ConsoleError, SessionInfo, Target, TestKind, TestSpec};
pub use ext::{LatencySummary, ULNET_DEBUG_PROBE};
pub use service::{SelftestService, ServiceConfig, SessionSummary, TestLatency, limits};
pub use srpc::{BufferUsage, EndpointLockStats, PartitionBuffers, RpcError, StartError};
