//! Addresses: LND types, nets, NIDs, process ids, NID range expressions, and the NID
//! descriptors of selection policies.

mod descriptor;
mod nid;
mod process_id;
mod range;
mod text;

pub use descriptor::{DescriptorParseError, NidDescriptor};
pub use nid::{AddressKind, LARGE_NID_LEN, LargeNidError, LndType, Net, Nid};
pub use process_id::{
    LNET_PID_ANY, LNET_PID_LUSTRE, LNET_PID_RESERVED, LNET_PID_USERFLAG, ProcessId,
    ProcessIdParseError,
};
pub use range::{
    AddrRange, DEFAULT_EXPANSION_LIMIT, ExprList, MAX_NIDRANGES, MAX_RANGE_EXPRS, NidList,
    NidRange, RangeError, RangeExpr, RangeParseError,
};
pub use text::{LND_NAMES, NetParseError, NidParseError};
