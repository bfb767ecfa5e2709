//! User defined selection policies on a running node: what `lnetctl udsp add|del|show` and
//! the `udsp info` of `net show -v 4` and `peer show -v 4` reach in the kernel. The rules
//! live in the engine (`ulnet_proto::engine::policies`), which stamps them onto NIs and
//! peer NIs; these calls change them with the core locked.
//!
//! lustre: lnet/lnet/api-ni.c (`IOC_LIBCFS_ADD_UDSP`, `IOC_LIBCFS_DEL_UDSP`,
//! `IOC_LIBCFS_GET_UDSP`, `lnet_udsp_info_send()`), lnet/lnet/udsp.c.

use ulnet_proto::addr::Nid;
use ulnet_proto::engine::{UdspAddError, UdspConstructInfo, UdspNotFound, UdspRule};

use crate::admin::AdminError;
use crate::calls::api_calls;
use crate::node::Node;

api_calls! {
    /// `lnetctl udsp add`: inserts the rule at `index` (appended when `None` or past the
    /// end) and applies every rule again; returns the index of the rule added (or of the
    /// equal priority rule whose priority changed).
    fn udsp_add(
        &mut self,
        rule: UdspRule,
        index: Option<usize>,
    ) -> Result<usize, AdminError<UdspAddError>> {
        self.core().engine.udsp_add(rule, index).map_err(AdminError::Refused)
    }
    shut_down => Err(AdminError::ShutDown);

    /// `lnetctl udsp del --idx N` (`Some`) or `--all` (`None`): what the rules matched is
    /// reverted.
    fn udsp_del(&mut self, index: Option<usize>) -> Result<(), AdminError<UdspNotFound>> {
        self.core().engine.udsp_del(index).map_err(AdminError::Refused)
    }
    shut_down => Err(AdminError::ShutDown);
}

impl Node {
    /// `lnetctl udsp show`: the rules in index order.
    pub fn udsp_rules(&self) -> Vec<UdspRule> {
        self.locked(|core, _| core.engine.udsp_rules().iter().cloned().collect())
    }

    /// The `udsp info` of the local NI (`remote` false) or the peer NI owning `nid`.
    pub fn udsp_info(&self, nid: Nid, remote: bool) -> Option<UdspConstructInfo> {
        self.locked(|core, _| core.engine.udsp_info(nid, remote))
    }
}
