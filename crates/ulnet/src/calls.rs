//! The API calls that change a node, declared once ([`api_calls!`]) and made two ways: one at a
//! time on a [`Node`], or several under one lock of the core in a [`Node::batch`] ([`Calls`]).
//!
//! Each API call locks the core, makes its call, and carries out what the core produced (the
//! drain: events to their queues, transmits to the LNDs, output written). A service that
//! answers an event with several calls (post a buffer, bind an MD, send from it) pays that for
//! each. In a batch the calls share one lock and one drain at the end, which is also when
//! their messages leave. The calls themselves are the node's, with the same errors.
//!
//! On a node of several partitions the core is taken shared first, and the message path's
//! calls (binding, attaching and unlinking MDs and MEs, `put`, `get`) are made on the
//! partitions their plans name, beside the other partitions' threads; the first call that
//! needs the whole node (any other call, or one the engine declines) takes the core
//! exclusively for the rest of the batch (decision 0029).

use ulnet_proto::addr::ProcessId;
use ulnet_proto::engine::{
    GetRequest, InsertPosition, MdHandle, MdSpec, MeHandle, PutRequest, Rejected, Tunables,
    UnlinkMode,
};
use ulnet_proto::time::Time;

use crate::clock;
use crate::driver::{Core, CoreGuard, CoreRead, Owed, Wakes};
use crate::error::{
    InitiateError, MdAttachError, MdBindError, MdError, MeAttachError, MeUnlinkError, PortalError,
    PostError, SetTunablesError, ShutDown,
};
use crate::event_queue::EventQueue;
use crate::node::Node;

/// The calls of one [`Node::batch`], made with the core locked.
pub struct Calls<'a> {
    pub(crate) node: &'a Node,
    held: Held<'a>,
    pub(crate) now: Time,
}

/// How a batch holds the core.
enum Held<'a> {
    Shared(CoreRead<'a>),
    Exclusive(CoreGuard<'a>),
    /// Between the two, for the instant the lock changes hands.
    Released,
}

impl<'a> Calls<'a> {
    /// The core, held exclusively: taken so now if the batch held it shared (a call that
    /// needs the whole node), for the rest of the batch.
    pub(crate) fn core(&mut self) -> &mut Core {
        if !matches!(self.held, Held::Exclusive(_)) {
            // The shared hold goes first: taking the lock exclusively while holding it shared
            // would wait for ourselves.
            self.held = Held::Released;
            let shared = self.node.shared();
            shared.counters.core_shared_declined.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.held = Held::Exclusive(shared.lock());
            // Under the lock, so that `now` never goes backwards for the core.
            self.now = clock::now().max(self.now);
        }
        match &mut self.held {
            Held::Exclusive(core) => core,
            // Unreachable: set just above.
            Held::Shared(_) | Held::Released => unreachable_core(),
        }
    }

    /// `now` with the core held exclusively ([`core`](Self::core)).
    pub(crate) fn exclusive_now(&mut self) -> Time {
        self.core();
        self.now
    }

    /// The core as held (shared or exclusive), for what reads it or changes only its leaf
    /// locks.
    pub(crate) fn held_core(&self) -> &Core {
        match &self.held {
            Held::Shared(core) => core,
            Held::Exclusive(core) => core,
            Held::Released => unreachable_core(),
        }
    }

    /// The core, if held shared: a message-path call tries the engine's call on partitions
    /// on it first.
    fn shared_core(&self) -> Option<&Core> {
        match &self.held {
            Held::Shared(core) => Some(core),
            Held::Exclusive(_) | Held::Released => None,
        }
    }

    pub(crate) fn closed(&self) -> bool {
        self.held_core().closed
    }
}

/// A batch's core is held from its start to its end; `Released` lasts only while
/// [`Calls::core`] changes the lock's hands.
#[allow(clippy::panic)]
fn unreachable_core() -> ! {
    panic!("a batch's core is held from its start to its end")
}

/// Declares API calls once. Each entry is a [`Calls`] method (its documentation, signature and
/// body, which works on `self.core()` at `self.now`, or tries the engine's call on partitions
/// first) followed by `shut_down => value;`, what the call returns on a node that has shut
/// down. From it come:
///
/// * the [`Calls`] method, as written;
/// * the [`Node`] method of the same name, documentation and arguments: it locks the core,
///   returns the shut-down value if the node is closed, else makes the call, and carries out
///   what the call produced before it returns ([`Node::locked`]).
///
/// The engine's own method (on `ulnet_proto::engine::Engine`) is what the body calls: the engine
/// holds the behaviour, this list the API.
macro_rules! api_calls {
    ($(
        $(#[$doc:meta])*
        fn $name:ident(&mut $this:ident $(, $arg:ident: $type:ty)* $(,)?) -> $ret:ty
        $body:block
        shut_down => $shut_down:expr;
    )*) => {
        impl $crate::calls::Calls<'_> {
            $(
                $(#[$doc])*
                pub fn $name(&mut $this $(, $arg: $type)*) -> $ret $body
            )*
        }

        impl $crate::node::Node {
            $(
                $(#[$doc])*
                pub fn $name(&self $(, $arg: $type)*) -> $ret {
                    self.with_calls(|calls| {
                        if calls.closed() {
                            return $shut_down;
                        }
                        calls.$name($($arg),*)
                    })
                }
            )*
        }
    };
}
pub(crate) use api_calls;

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
        self.with_calls(|batch| if batch.closed() { Err(ShutDown) } else { Ok(calls(batch)) })
    }

    /// Runs `calls` with the core held (shared first on a node of several partitions), then
    /// carries out what they produced.
    pub(crate) fn with_calls<R>(&self, calls: impl FnOnce(&mut Calls<'_>) -> R) -> R {
        let shared = self.shared();
        let mut wakes = Wakes::default();
        let held = if shared.partitioned {
            Held::Shared(shared.read())
        } else {
            Held::Exclusive(shared.lock())
        };
        // Read the clock under the lock so `now` never goes backwards for the core.
        let mut batch = Calls { node: self, held, now: clock::now() };
        let result = calls(&mut batch);
        let Calls { held, mut now, .. } = batch;
        match held {
            Held::Shared(core) => crate::driver::drain_shared(
                shared,
                core,
                &mut now,
                &mut wakes,
                Owed::default(),
                true,
            ),
            Held::Exclusive(core) => {
                drop(crate::driver::drain_call(shared, core, &mut now, &mut wakes))
            }
            Held::Released => {}
        }
        wakes.finish();
        result
    }
}

api_calls! {
    /// `LNetMEAttach`: a match entry on `portal` for initiators matching `match_id` and match
    /// bits equal to `match_bits` outside `ignore_bits`.
    fn me_attach(
        &mut self,
        portal: u32,
        match_id: ProcessId,
        match_bits: u64,
        ignore_bits: u64,
        unlink: UnlinkMode,
        position: InsertPosition,
    ) -> Result<MeHandle, MeAttachError> {
        if let Some(core) = self.shared_core() {
            let made =
                core.engine.try_me_attach(portal, match_id, match_bits, ignore_bits, unlink, position);
            if let Some(made) = made {
                return Ok(made?);
            }
        }
        Ok(self.core().engine.me_attach(
            portal,
            match_id,
            match_bits,
            ignore_bits,
            unlink,
            position,
        )?)
    }
    shut_down => Err(MeAttachError::ShutDown);

    /// Removes an ME that has no MD.
    fn me_unlink(&mut self, me: MeHandle) -> Result<(), MeUnlinkError> {
        if let Some(done) = self.shared_core().and_then(|core| core.engine.try_me_unlink(me)) {
            return done.map_err(MeUnlinkError::Core);
        }
        self.core().engine.me_unlink(me).map_err(MeUnlinkError::Core)
    }
    shut_down => Err(MeUnlinkError::ShutDown);

    /// `LNetMDAttach`: a passive MD (with `OP_PUT` and/or `OP_GET`) on `me`. Its events go to
    /// `events`; with `None` it has none, and its memory is freed when it unlinks. On failure the
    /// ME is unlinked too (as in Lustre) and the memory comes back in the error.
    fn md_attach(
        &mut self,
        me: MeHandle,
        spec: MdSpec,
        unlink: UnlinkMode,
        events: Option<&EventQueue>,
    ) -> Result<MdHandle, Rejected<MdAttachError>> {
        let (spec, queue) = match self.node.route(spec, events) {
            Ok(routed) => routed,
            Err(memory) => {
                return Err(Rejected { error: MdAttachError::ForeignEventQueue, memory });
            }
        };
        let now = self.now;
        let made = match self.shared_core() {
            Some(core) => core.engine.try_md_attach(now, me, spec, unlink),
            None => Err(spec),
        };
        let made = match made {
            Ok(made) => made,
            Err(spec) => self.core().engine.md_attach(now, me, spec, unlink),
        };
        let handle = made.map_err(|rejected| Rejected {
            error: rejected.error.into(),
            memory: rejected.memory,
        })?;
        if let Some(queue) = queue {
            self.held_core().register_queue(queue);
        }
        Ok(handle)
    }
    shut_down => Err(Rejected { error: MdAttachError::ShutDown, memory: spec.memory });

    /// `LNetMDBind`: a free-floating MD to send from ([`put`](Self::put)) or receive a REPLY
    /// into ([`get`](Self::get)); at most `LNET_MTU` (1 MiB). Events as for
    /// [`md_attach`](Self::md_attach). The MD is made on the partition `spec` names, else on
    /// the calling thread's ([`Node::current_partition`]), as the kernel's `LNetMDBind()` takes
    /// the binding CPU's.
    fn md_bind(
        &mut self,
        spec: MdSpec,
        unlink: UnlinkMode,
        events: Option<&EventQueue>,
    ) -> Result<MdHandle, Rejected<MdBindError>> {
        let spec = match spec.cpt {
            None if self.held_core().engine.partitions().count() > 1 => {
                spec.on_partition(self.node.current_partition())
            }
            _ => spec,
        };
        let (spec, queue) = match self.node.route(spec, events) {
            Ok(routed) => routed,
            Err(memory) => return Err(Rejected { error: MdBindError::ForeignEventQueue, memory }),
        };
        let made = match self.shared_core() {
            Some(core) => core.engine.try_md_bind(spec, unlink),
            None => Err(spec),
        };
        let made = match made {
            Ok(made) => made,
            Err(spec) => self.core().engine.md_bind(spec, unlink),
        };
        let handle = made.map_err(|rejected| Rejected {
            error: rejected.error.into(),
            memory: rejected.memory,
        })?;
        if let Some(queue) = queue {
            self.held_core().register_queue(queue);
        }
        Ok(handle)
    }
    shut_down => Err(Rejected { error: MdBindError::ShutDown, memory: spec.memory });

    /// `LNetMDUnlink`: an idle MD goes at once (an UNLINK event hands its memory back); a busy
    /// one goes when its last message finishes, and that message's event carries `unlinked`
    /// and the memory. The handle stops resolving immediately.
    fn md_unlink(&mut self, md: MdHandle) -> Result<(), MdError> {
        let now = self.now;
        if let Some(done) = self.shared_core().and_then(|core| core.engine.try_md_unlink(now, md)) {
            return done.map_err(MdError::Core);
        }
        self.core().engine.md_unlink(now, md).map_err(MdError::Core)
    }
    shut_down => Err(MdError::ShutDown);

    /// `LNetPut`: sends the whole bound MD. Fails only for a bad MD or a full message table;
    /// every later failure arrives in the SEND event.
    fn put(&mut self, request: &PutRequest) -> Result<(), InitiateError> {
        let now = self.now;
        if let Some(done) = self.shared_core().and_then(|core| core.engine.try_put(now, request)) {
            return done.map_err(InitiateError::Core);
        }
        self.core().engine.put(now, request).map_err(InitiateError::Core)
    }
    shut_down => Err(InitiateError::ShutDown);

    /// `LNetGet`: asks for the bound MD's length; the REPLY data lands at offset 0.
    fn get(&mut self, request: &GetRequest) -> Result<(), InitiateError> {
        let now = self.now;
        if let Some(done) = self.shared_core().and_then(|core| core.engine.try_get(now, request)) {
            return done.map_err(InitiateError::Core);
        }
        self.core().engine.get(now, request).map_err(InitiateError::Core)
    }
    shut_down => Err(InitiateError::ShutDown);

    /// Posts a receive buffer the common way: an ME for any initiator with exactly
    /// `match_bits`, appended to `portal`, and `spec` attached with its events on `events`;
    /// both unlink when the MD is exhausted.
    fn post(
        &mut self,
        portal: u32,
        match_bits: u64,
        spec: MdSpec,
        events: &EventQueue,
    ) -> Result<MdHandle, Rejected<PostError>> {
        self.post_at(portal, match_bits, InsertPosition::After, spec, events)
    }
    shut_down => Err(Rejected {
        error: PostError::MeAttach(MeAttachError::ShutDown),
        memory: spec.memory,
    });

    /// [`post`](Calls::post) at `position`: with `InsertPosition::Local { cpt }` the buffer
    /// goes to partition `cpt`'s match table of the portal, where the PUTs received on that
    /// partition look first (lnet_selftest posts its request buffers so, a set per partition;
    /// [`Node::current_partition`] is the calling thread's).
    fn post_at(
        &mut self,
        portal: u32,
        match_bits: u64,
        position: InsertPosition,
        spec: MdSpec,
        events: &EventQueue,
    ) -> Result<MdHandle, Rejected<PostError>> {
        let attached = self.me_attach(
            portal,
            ProcessId::ANY,
            match_bits,
            0,
            UnlinkMode::Unlink,
            position,
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
    shut_down => Err(Rejected {
        error: PostError::MeAttach(MeAttachError::ShutDown),
        memory: spec.memory,
    });

    /// `LNetSetLazyPortal`: PUTs that match nothing on `portal` wait (bounded) for an MD
    /// instead of being dropped, and their sender's connection stops being read meanwhile.
    fn set_lazy_portal(&mut self, portal: u32) -> Result<(), PortalError> {
        self.core().engine.set_lazy_portal(portal).map_err(PortalError::Core)
    }
    shut_down => Err(PortalError::ShutDown);

    /// `LNetClearLazyPortal`: the portal stops delaying, and every delayed PUT is dropped.
    fn clear_lazy_portal(&mut self, portal: u32) -> Result<(), PortalError> {
        let now = self.exclusive_now();
        self.core().engine.clear_lazy_portal(now, portal).map_err(PortalError::Core)
    }
    shut_down => Err(PortalError::ShutDown);

    /// Replaces the global tunables live (`lnetctl set transaction_timeout ...`): checked as
    /// at build time, applied from the next send on; deadlines already armed keep theirs.
    /// Turning discovery on or off installs a new ping buffer and pushes it to peers.
    fn set_tunables(&mut self, tunables: Tunables) -> Result<(), SetTunablesError> {
        let now = self.exclusive_now();
        self.core().engine.set_tunables(now, tunables).map_err(SetTunablesError::Invalid)
    }
    shut_down => Err(SetTunablesError::ShutDown);
}

impl std::fmt::Debug for Calls<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Calls").field("node", self.node).finish_non_exhaustive()
    }
}
