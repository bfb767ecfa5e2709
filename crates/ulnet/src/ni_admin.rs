//! Administering a running node's NIs: health (`lnetctl net set --health`), and the link state
//! the OS reports (see `link_watch`).

use ulnet_proto::addr::Nid;
use ulnet_proto::engine::NiSetError;

use crate::error::ShutDown;
use crate::node::Node;

/// Why [`Node::set_ni_health`] refused.
#[derive(Debug, thiserror::Error)]
pub enum NiHealthError {
    #[error("the node is shut down")]
    ShutDown,
    /// No NI of this node has the NID.
    #[error("no local NI {0}")]
    UnknownNid(Nid),
    /// The core refused the value or the NI (loopback, out of range).
    #[error(transparent)]
    Core(#[from] NiSetError),
}

impl Node {
    /// `lnetctl net set --health V [--nid N | --all]`: sets one NI's health (`Some(nid)`) or
    /// every network NI's (`None`). Below the maximum the NI is queued for recovery and pinged
    /// over itself (its own NID through its LND) until it is back.
    /// lustre: lnet/lnet/api-ni.c `lnet_ni_set_healthv()`.
    pub fn set_ni_health(&self, nid: Option<Nid>, value: u32) -> Result<(), NiHealthError> {
        self.locked(|core, now| {
            if core.closed {
                return Err(NiHealthError::from(ShutDown));
            }
            let ni = match nid {
                Some(nid) => {
                    Some(core.engine.ni_for_nid(nid).ok_or(NiHealthError::UnknownNid(nid))?)
                }
                None => None,
            };
            core.engine.set_ni_health(now, ni, value)?;
            Ok(())
        })
    }
}

impl From<ShutDown> for NiHealthError {
    fn from(ShutDown: ShutDown) -> Self {
        NiHealthError::ShutDown
    }
}
