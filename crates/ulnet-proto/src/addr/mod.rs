//! Addresses: LND types, nets, NIDs, process ids, and NID range expressions.

mod nid;
mod text;

pub use nid::{AddressKind, LARGE_NID_LEN, LargeNidError, LndType, Net, Nid};
pub use text::LND_NAMES;
