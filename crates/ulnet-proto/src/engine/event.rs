//! Events: what the core reports to the user about MDs.
//!
//! lustre: include/uapi/linux/lnet/lnet-types.h (`enum lnet_event_kind`, `struct lnet_event`),
//! lnet/lnet/lib-msg.c `lnet_build_msg_event()`, lib-md.c `lnet_build_unlink_event()`.

use crate::addr::Nid;
use crate::engine::md::MdHandle;
use crate::engine::me::ProcessId;
use crate::engine::memory::Memory;

/// `enum lnet_event_kind`, with Lustre's numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EventKind {
    /// Target: a GET matched and its REPLY send completed.
    Get = 1,
    /// Target: PUT data is in the MD.
    Put = 2,
    /// Initiator: REPLY data is in the GET's MD.
    Reply = 3,
    /// Initiator: an ACK arrived for a PUT.
    Ack = 4,
    /// Initiator: the PUT or GET left (or failed to leave) this node. Says nothing of delivery.
    Send = 5,
    /// An idle MD was unlinked explicitly (or by its response tracker).
    Unlink = 6,
}

/// An event's status, a Linux errno in Lustre (`ev->status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventStatus {
    Ok,
    /// `-ETIMEDOUT`: the MD was unlinked while this operation was in flight, or a timeout.
    TimedOut,
    /// `-ECANCELED`: the MD was unlinked while the message waited for credits.
    Canceled,
    /// `-EHOSTUNREACH`: no local NI reaches the target.
    HostUnreachable,
    /// `-ENOMEM`: a bounded table was full.
    NoMemory,
    /// `-EIO`: the LND failed the transfer.
    Io,
    /// `-EPROTO`: the payload did not arrive as the header promised.
    Protocol,
}

impl EventStatus {
    pub fn is_ok(self) -> bool {
        self == Self::Ok
    }

    /// The negative Linux errno Lustre would report.
    pub fn errno(self) -> i32 {
        match self {
            Self::Ok => 0,
            Self::TimedOut => -110,
            Self::Canceled => -125,
            Self::HostUnreachable => -113,
            Self::NoMemory => -12,
            Self::Io => -5,
            Self::Protocol => -71,
        }
    }
}

/// One event (`struct lnet_event`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    /// The MD the event is about, and its user value.
    pub md: MdHandle,
    pub user_ptr: u64,
    /// The MD's [`handler`](crate::engine::MdSpec::handler).
    pub handler: u64,
    /// Who started the operation: the primary NID and pid of the PUT/GET's originator.
    pub initiator: ProcessId,
    /// The NID the message came from end to end (the header's source NID).
    pub source: Nid,
    /// The last hop (the router when routed; equal to `source` without routing).
    pub sender: Nid,
    /// Who the operation was addressed to.
    pub target: ProcessId,
    pub portal: u32,
    pub match_bits: u64,
    /// Bytes requested (PUT payload, GET sink length, REPLY payload).
    pub rlength: u32,
    /// Bytes actually transferred into or out of the MD.
    pub mlength: u32,
    /// Offset in the MD where the data went or came from.
    pub offset: u32,
    pub hdr_data: u64,
    pub status: EventStatus,
    /// This is the last event of the MD; it is gone.
    pub unlinked: bool,
    /// The MD's memory, handed back with the event that reports it unlinked.
    pub memory: Option<Memory>,
}

/// The per-message part of an event, captured when the message is built or matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EventTemplate {
    pub(crate) initiator: ProcessId,
    pub(crate) source: Nid,
    pub(crate) sender: Nid,
    pub(crate) target: ProcessId,
    pub(crate) portal: u32,
    pub(crate) match_bits: u64,
    pub(crate) rlength: u32,
    pub(crate) mlength: u32,
    pub(crate) offset: u32,
    pub(crate) hdr_data: u64,
}

impl EventTemplate {
    pub(crate) const EMPTY: Self = Self {
        initiator: ProcessId::ANY,
        source: Nid::ANY,
        sender: Nid::ANY,
        target: ProcessId::ANY,
        portal: 0,
        match_bits: 0,
        rlength: 0,
        mlength: 0,
        offset: 0,
        hdr_data: 0,
    };

    pub(crate) fn event(
        &self,
        kind: EventKind,
        md: MdHandle,
        (user_ptr, handler): (u64, u64),
        status: EventStatus,
    ) -> Event {
        Event {
            kind,
            md,
            user_ptr,
            handler,
            initiator: self.initiator,
            source: self.source,
            sender: self.sender,
            target: self.target,
            portal: self.portal,
            match_bits: self.match_bits,
            rlength: self.rlength,
            mlength: self.mlength,
            offset: self.offset,
            hdr_data: self.hdr_data,
            status,
            unlinked: false,
            memory: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_errnos_match_lustre() {
        assert_eq!(EventKind::Get as u8, 1);
        assert_eq!(EventKind::Unlink as u8, 6);
        assert_eq!(EventStatus::TimedOut.errno(), -110);
        assert_eq!(EventStatus::Canceled.errno(), -125);
        assert!(EventStatus::Ok.is_ok() && !EventStatus::Io.is_ok());
    }
}
