//! The bounds on what a console (any peer: selftest has no authentication) can make a node
//! hold. Each request past one is answered with the status the kernel gives when it cannot
//! hold what was asked, and nothing is allocated for it.
//!
//! The kernel checks a TEST request's fields against `SFW_MAX_NDESTS` and `SFW_MAX_CONCUR`
//! (`EINVAL`), then allocates one test unit per destination × concurrency, a test instance per
//! test and a batch per new batch id, answering `ENOMEM` when an allocation fails (lustre:
//! framework.c `sfw_add_test()`, `sfw_add_test_instance()`, `sfw_bid2batch()`). With the field
//! limits alone a single request may ask for 87,296 × 1024 units: the kernel would try and fail,
//! ulnet refuses it up front with the same `ENOMEM`.

use ulnet::proto::wire::selftest::{LST_MAX_CONCUR, SFW_MAX_NDESTS_4K};

pub use crate::srpc::{DEFAULT_BULK_BUDGET, SPARE_IDLE};

/// Most destinations a client test lists: `SFW_MAX_NDESTS`, `LNET_MAX_IOV` pages of 12-byte
/// `lnet_process_id_packed` (341 per 4 KiB page), 87,296. Past it: `EINVAL`.
/// lustre: selftest.h `SFW_MAX_NDESTS`, framework.c `sfw_add_test()`.
pub const MAX_DESTINATIONS: usize = SFW_MAX_NDESTS_4K;

/// Highest concurrency of a test: `SFW_MAX_CONCUR` = `LST_MAX_CONCUR`, 1024. Past it: `EINVAL`.
/// lustre: selftest.h `SFW_MAX_CONCUR`, framework.c `sfw_add_test()`.
pub const MAX_CONCURRENCY: u32 = LST_MAX_CONCUR;

/// Most test units (destination × concurrency: each may have an RPC and its bulk in flight)
/// the node holds across its session and the zombie sessions still stopping. A TEST request
/// that would pass it is answered `ENOMEM`, what the kernel's failed unit allocation in
/// `sfw_add_test_instance()` reports, before its destination list is fetched. 65,536 is
/// `LST_MAX_CONCUR` to 64 destinations, or concurrency 64 to 1024 destinations: more than a
/// test node can keep busy, while the units themselves stay a few tens of MiB.
pub const MAX_UNITS: usize = 64 * LST_MAX_CONCUR as usize;

/// Most tests in one batch. The kernel keeps a batch's tests in an unbounded list, each a
/// `LIBCFS_ALLOC` that answers `ENOMEM` on failure (framework.c `sfw_add_test_instance()`);
/// past this bound ulnet answers that `ENOMEM`. lst scripts use a handful per batch.
pub const MAX_TESTS_PER_BATCH: usize = 256;

/// Most batches in one session. The kernel makes a batch for each new batch id and drops the
/// TEST request when that allocation fails (framework.c `sfw_bid2batch()`, "dropping RPC ...
/// under memory pressure", -ENOMEM); past this bound ulnet answers `ENOMEM` in the reply, so
/// the console learns why.
pub const MAX_BATCHES_PER_SESSION: usize = 256;

/// Largest BRW transfer: `LNET_MTU`, 1 MiB. Past it (or 0): `EINVAL`.
/// lustre: brw_test.c `brw_server_handle()`, `brw_client_init()`.
pub const MAX_BULK_LEN: usize = super::LNET_MTU;

/// Linux errno values the bounds answer with (positive, as selftest puts them on the wire).
pub(crate) mod errnos {
    pub const ENOMEM: u32 = 12;
}
