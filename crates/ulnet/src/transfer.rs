//! Convenience transfers on top of the primitives: a PUT that waits for its ACK, a GET that
//! returns the REPLY data. Each binds a private MD with threshold 2 (the SEND and the response),
//! waits on a private event queue until the MD's final event hands the memory back, and unlinks
//! the MD if the caller gives up (timeout, or a dropped future).

use std::time::{Duration, Instant};

use ulnet_proto::addr::ProcessId;
use ulnet_proto::engine::{
    Event, EventKind, GetRequest, MdHandle, MdSpec, Memory, PutRequest, Threshold, UnlinkMode,
};

use crate::error::{RecvError, TransferError};
use crate::event_queue::{EqShared, EventQueue};
use crate::node::Node;

/// Events one transfer can see: SEND, the response, and an UNLINK; one spare.
const TRANSFER_QUEUE_CAPACITY: usize = 4;

/// A finished transfer: the response event and the MD's memory, handed back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transferred {
    /// The ACK (for a PUT) or REPLY (for a GET). `mlength` is what the target accepted or sent.
    pub event: Event,
    pub memory: Memory,
}

impl Node {
    /// PUTs `memory` to `portal`/`match_bits` on `target`, asks for an ACK, and waits up to
    /// `timeout` for it. Returns the ACK event (its `mlength` is what the target accepted) and
    /// the memory.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ulnet::*;
    ///
    /// let node = Node::loopback().unwrap();
    /// let inbox = node.event_queue(8);
    /// node.post(3, 7, MdSpec::new(Memory::new(vec![0; 4096])).options(MdOptions::OP_PUT), &inbox)
    ///     .unwrap();
    /// let me = ProcessId::new(Nid::LO_0, node.pid());
    /// let done = node
    ///     .put_and_wait_ack(me, 3, 7, Memory::new(vec![9; 4096]), Duration::from_secs(10))
    ///     .unwrap();
    /// assert_eq!(done.event.kind, EventKind::Ack);
    /// assert_eq!(done.event.mlength, 4096);
    /// assert_eq!(done.memory.len(), 4096);
    /// ```
    pub fn put_and_wait_ack(
        &self,
        target: ProcessId,
        portal: u32,
        match_bits: u64,
        memory: Memory,
        timeout: Duration,
    ) -> Result<Transferred, TransferError> {
        self.start_put(target, portal, match_bits, memory)?.wait(timeout)
    }

    /// [`put_and_wait_ack`](Self::put_and_wait_ack) for async code, on any executor. No timeout
    /// of its own: the core's response tracking (`transaction_timeout`) bounds the wait, and
    /// dropping the future unlinks the MD.
    pub async fn put_and_wait_ack_async(
        &self,
        target: ProcessId,
        portal: u32,
        match_bits: u64,
        memory: Memory,
    ) -> Result<Transferred, TransferError> {
        self.start_put(target, portal, match_bits, memory)?.wait_async().await
    }

    /// GETs `buffer.len()` bytes from `portal`/`match_bits` on `target` and waits up to
    /// `timeout` for the REPLY; returns `buffer` cut to the length the target sent.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ulnet::*;
    ///
    /// let node = Node::loopback().unwrap();
    /// let served = node.event_queue(8);
    /// let source = MdSpec::new(Memory::new(b"served data".to_vec()))
    ///     .options(MdOptions::OP_GET | MdOptions::TRUNCATE);
    /// node.post(5, 1, source, &served).unwrap();
    /// let me = ProcessId::new(Nid::LO_0, node.pid());
    /// let data = node.get_into(me, 5, 1, vec![0; 64], Duration::from_secs(10)).unwrap();
    /// assert_eq!(data, b"served data");
    /// ```
    pub fn get_into(
        &self,
        target: ProcessId,
        portal: u32,
        match_bits: u64,
        buffer: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransferError> {
        let completion = self.start_get(target, portal, match_bits, buffer)?.wait(timeout)?;
        Ok(reply_data(completion))
    }

    /// [`get_into`](Self::get_into) for async code, on any executor; bounded as
    /// [`put_and_wait_ack_async`](Self::put_and_wait_ack_async) is.
    pub async fn get_into_async(
        &self,
        target: ProcessId,
        portal: u32,
        match_bits: u64,
        buffer: Vec<u8>,
    ) -> Result<Vec<u8>, TransferError> {
        let completion = self.start_get(target, portal, match_bits, buffer)?.wait_async().await?;
        Ok(reply_data(completion))
    }

    fn start_put(
        &self,
        target: ProcessId,
        portal: u32,
        match_bits: u64,
        memory: Memory,
    ) -> Result<Pending<'_>, TransferError> {
        let pending = self.bind_private(memory, EventKind::Ack)?;
        let request = PutRequest {
            md: pending.md,
            ack: true,
            target,
            portal,
            match_bits,
            remote_offset: 0,
            hdr_data: 0,
            source: None,
        };
        self.put(&request).map_err(TransferError::Initiate)?;
        Ok(pending)
    }

    fn start_get(
        &self,
        target: ProcessId,
        portal: u32,
        match_bits: u64,
        buffer: Vec<u8>,
    ) -> Result<Pending<'_>, TransferError> {
        let pending = self.bind_private(Memory::new(buffer), EventKind::Reply)?;
        let request = GetRequest {
            md: pending.md,
            target,
            portal,
            match_bits,
            remote_offset: 0,
            source: None,
        };
        self.get(&request).map_err(TransferError::Initiate)?;
        Ok(pending)
    }

    fn bind_private(
        &self,
        memory: Memory,
        expected: EventKind,
    ) -> Result<Pending<'_>, TransferError> {
        // Private queues are not registered for closing: the MD's final event always arrives
        // (shutdown unlinks every routed MD), which is all a transfer waits for.
        let queue =
            EventQueue { shared: EqShared::new(self.shared(), TRANSFER_QUEUE_CAPACITY, None) };
        let spec = MdSpec::new(memory).threshold(Threshold::Count(2));
        let md = self
            .md_bind(spec, UnlinkMode::Unlink, Some(&queue))
            .map_err(|rejected| TransferError::Bind(rejected.error))?;
        Ok(Pending { node: self, queue, md, expected, response: None, live: true })
    }
}

/// A transfer in progress; unlinks its MD if dropped before the final event.
struct Pending<'a> {
    node: &'a Node,
    queue: EventQueue,
    md: MdHandle,
    expected: EventKind,
    response: Option<Event>,
    /// The MD has not reported itself unlinked yet.
    live: bool,
}

impl Pending<'_> {
    fn wait(mut self, timeout: Duration) -> Result<Transferred, TransferError> {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let remaining = match deadline {
                Some(deadline) => deadline.saturating_duration_since(Instant::now()),
                None => Duration::MAX,
            };
            match self.queue.recv_timeout(remaining) {
                Ok(event) => {
                    if let Some(outcome) = self.observe(event) {
                        return outcome;
                    }
                }
                Err(RecvError::Timeout | RecvError::Empty) => {
                    return Err(TransferError::TimedOut(self.expected));
                }
                Err(RecvError::Closed) => return Err(TransferError::ShutDown),
            }
        }
    }

    async fn wait_async(mut self) -> Result<Transferred, TransferError> {
        while let Some(event) = self.queue.next().await {
            if let Some(outcome) = self.observe(event) {
                return outcome;
            }
        }
        Err(TransferError::ShutDown)
    }

    /// Folds one event in; `Some` when the transfer is over.
    fn observe(&mut self, mut event: Event) -> Option<Result<Transferred, TransferError>> {
        let memory = event.memory.take();
        if event.unlinked {
            self.live = false;
        }
        if event.kind == EventKind::Send && !event.status.is_ok() {
            // The request never left: no response will come (Drop unlinks the MD).
            return Some(Err(TransferError::Failed {
                kind: EventKind::Send,
                status: event.status,
            }));
        }
        let unlinked = event.unlinked;
        if event.kind == self.expected {
            self.response = Some(event);
        }
        if !unlinked {
            return None;
        }
        Some(match self.response.take() {
            Some(response) if response.status.is_ok() => {
                Ok(Transferred { event: response, memory: memory.unwrap_or_default() })
            }
            Some(response) => {
                Err(TransferError::Failed { kind: response.kind, status: response.status })
            }
            None => Err(TransferError::NoResponse(self.expected)),
        })
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if self.live {
            // Already gone (or the node shut down) is fine: we only want it gone.
            let _ = self.node.md_unlink(self.md);
        }
    }
}

/// The REPLY data: the GET's buffer (one segment) cut to the length received.
fn reply_data(completion: Transferred) -> Vec<u8> {
    let length = completion.event.mlength as usize;
    let mut data = completion.memory.into_segments().next().unwrap_or_default();
    data.truncate(length);
    data
}
