//! Several API calls under one lock of the core ([`Node::batch`]).
//!
//! Each API call locks the core, makes its call, and carries out what the core produced (the
//! drain: events to their queues, transmits to the LNDs, output written). A service that
//! answers an event with several calls (post a buffer, bind an MD, send from it) pays that for
//! each. In a batch the calls share one lock and one drain at the end, which is also when
//! their messages leave. The calls themselves are the node's primitives with the same errors.

use ulnet_proto::addr::ProcessId;
use ulnet_proto::engine::{
    GetRequest, InsertPosition, MdHandle, MdSpec, MeHandle, PutRequest, Rejected, UnlinkMode,
};
use ulnet_proto::time::Time;

use crate::driver::Core;
use crate::error::{
    InitiateError, MdAttachError, MdBindError, MdError, MeAttachError, PostError, ShutDown,
};
use crate::event_queue::EventQueue;
use crate::node::Node;

/// The calls of one [`Node::batch`], made with the core locked.
pub struct Calls<'a> {
    pub(crate) node: &'a Node,
    pub(crate) core: &'a mut Core,
    pub(crate) now: Time,
}

impl Node {
    /// Runs `calls` with the core locked once, then carries out what all its calls produced
    /// (one drain instead of one per call); their messages leave when `calls` returns. Keep it
    /// short: every other user of the node waits meanwhile. On a node that has shut down,
    /// returns `ShutDown` without running `calls` (what it captured is dropped).
    ///
    /// ```
    /// use ulnet::{Memory, MdSpec, Node, UnlinkMode};
    ///
    /// let node = Node::loopback().unwrap();
    /// let (one, two) = node
    ///     .batch(|calls| {
    ///         let one = calls.md_bind(MdSpec::new(Memory::new(vec![1])), UnlinkMode::Retain, None);
    ///         let two = calls.md_bind(MdSpec::new(Memory::new(vec![2])), UnlinkMode::Retain, None);
    ///         (one.unwrap(), two.unwrap())
    ///     })
    ///     .unwrap();
    /// assert_ne!(one, two);
    /// ```
    pub fn batch<R>(&self, calls: impl FnOnce(&mut Calls<'_>) -> R) -> Result<R, ShutDown> {
        self.locked(|core, now| {
            if core.closed {
                return Err(ShutDown);
            }
            Ok(calls(&mut Calls { node: self, core, now }))
        })
    }
}

impl Calls<'_> {
    /// [`Node::me_attach`].
    pub fn me_attach(
        &mut self,
        portal: u32,
        match_id: ProcessId,
        match_bits: u64,
        ignore_bits: u64,
        unlink: UnlinkMode,
        position: InsertPosition,
    ) -> Result<MeHandle, MeAttachError> {
        Ok(self.core.engine.me_attach(
            portal,
            match_id,
            match_bits,
            ignore_bits,
            unlink,
            position,
        )?)
    }

    /// [`Node::md_attach`].
    pub fn md_attach(
        &mut self,
        me: MeHandle,
        spec: MdSpec,
        unlink: UnlinkMode,
        events: Option<&EventQueue>,
    ) -> Result<MdHandle, Rejected<MdAttachError>> {
        let (spec, route) = match self.node.route(spec, events) {
            Ok(routed) => routed,
            Err(memory) => {
                return Err(Rejected { error: MdAttachError::ForeignEventQueue, memory });
            }
        };
        let handle =
            self.core.engine.md_attach(self.now, me, spec, unlink).map_err(|rejected| {
                Rejected { error: rejected.error.into(), memory: rejected.memory }
            })?;
        if let Some(queue) = route {
            self.core.route(handle, queue);
        }
        Ok(handle)
    }

    /// [`Node::md_bind`].
    pub fn md_bind(
        &mut self,
        spec: MdSpec,
        unlink: UnlinkMode,
        events: Option<&EventQueue>,
    ) -> Result<MdHandle, Rejected<MdBindError>> {
        let (spec, route) = match self.node.route(spec, events) {
            Ok(routed) => routed,
            Err(memory) => return Err(Rejected { error: MdBindError::ForeignEventQueue, memory }),
        };
        let handle = self.core.engine.md_bind(spec, unlink).map_err(|rejected| Rejected {
            error: rejected.error.into(),
            memory: rejected.memory,
        })?;
        if let Some(queue) = route {
            self.core.route(handle, queue);
        }
        Ok(handle)
    }

    /// [`Node::md_unlink`].
    pub fn md_unlink(&mut self, md: MdHandle) -> Result<(), MdError> {
        self.core.engine.md_unlink(self.now, md).map_err(MdError::Core)
    }

    /// [`Node::put`].
    pub fn put(&mut self, request: &PutRequest) -> Result<(), InitiateError> {
        self.core.engine.put(self.now, request).map_err(InitiateError::Core)
    }

    /// [`Node::get`].
    pub fn get(&mut self, request: &GetRequest) -> Result<(), InitiateError> {
        self.core.engine.get(self.now, request).map_err(InitiateError::Core)
    }

    /// [`Node::post`]: a buffer on `portal` for any initiator's `match_bits`, both unlinked
    /// after one use.
    pub fn post(
        &mut self,
        portal: u32,
        match_bits: u64,
        spec: MdSpec,
        events: &EventQueue,
    ) -> Result<MdHandle, Rejected<PostError>> {
        let attached = self.me_attach(
            portal,
            ProcessId::ANY,
            match_bits,
            0,
            UnlinkMode::Unlink,
            InsertPosition::After,
        );
        let me = match attached {
            Ok(me) => me,
            Err(error) => {
                return Err(Rejected { error: PostError::MeAttach(error), memory: spec.memory });
            }
        };
        self.md_attach(me, spec, UnlinkMode::Unlink, Some(events)).map_err(|rejected| Rejected {
            error: PostError::MdAttach(rejected.error),
            memory: rejected.memory,
        })
    }
}

impl std::fmt::Debug for Calls<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Calls").field("node", self.node).finish_non_exhaustive()
    }
}
