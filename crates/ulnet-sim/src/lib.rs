//! ulnet-sim: whole LNet clusters on virtual time, running the real `ulnet-proto` engines.
//!
//! Map: [`scenario`] reads and checks scenario files; [`world`] is the simulation (nodes,
//! the driver, the invariant checks) over [`queue`], its event queue; [`network`] models links and
//! switches; [`socklnd`] models the TCP LND's connections; [`workload`] drives lst-style
//! and Lustre-style RPCs; [`results`] gathers what a run did into JSON; [`plot`] draws it;
//! [`sweep`] runs a scenario over parameter values; [`advise`] suggests WAN tunables and
//! checks them by simulation; [`bench`](mod@bench) measures the simulator.

pub mod advise;
pub mod bench;
pub mod histogram;
pub mod lanes;
pub mod network;
pub mod plot;
pub mod queue;
pub mod results;
pub mod scenario;
pub mod socklnd;
pub mod sweep;
pub mod workload;
pub mod world;
