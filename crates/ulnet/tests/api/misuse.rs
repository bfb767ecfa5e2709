//! API misuse returns the exact typed error (and hands memory back where there is memory).

use ulnet::proto::engine as core;
use ulnet::*;

use crate::*;

fn bound(node: &Node) -> MdHandle {
    node.md_bind(MdSpec::new(Memory::new(vec![1])), UnlinkMode::Retain, None).unwrap()
}

fn put_request(md: MdHandle, node: &Node) -> PutRequest {
    PutRequest {
        md,
        ack: false,
        target: lo_target(node),
        portal: 1,
        match_bits: 0,
        remote_offset: 0,
        hdr_data: 0,
        source: None,
    }
}

#[test]
fn bad_portal_index() {
    let node = Node::loopback().unwrap();
    let error = node
        .me_attach(64, ProcessId::ANY, 0, 0, UnlinkMode::Unlink, InsertPosition::After)
        .unwrap_err();
    assert_eq!(error, MeAttachError::Core(core::MeAttachError::BadPortal(64)));
    assert_eq!(node.set_lazy_portal(99), Err(PortalError::Core(core::PortalError::BadPortal(99))));
    assert_eq!(
        node.clear_lazy_portal(64),
        Err(PortalError::Core(core::PortalError::BadPortal(64)))
    );
}

#[test]
fn attach_without_an_operation_gives_the_memory_back() {
    let node = Node::loopback().unwrap();
    let me =
        node.me_attach(1, ProcessId::ANY, 0, 0, UnlinkMode::Unlink, InsertPosition::After).unwrap();
    let rejected = node
        .md_attach(me, MdSpec::new(Memory::new(vec![4, 5])), UnlinkMode::Unlink, None)
        .unwrap_err();
    assert_eq!(rejected.error, MdAttachError::Core(core::MdAttachError::NoOperation));
    assert_eq!(rejected.memory.to_vec(), [4, 5]);
    // Lustre unlinks the ME with the failed attach.
    let again = node.md_attach(me, sink(1), UnlinkMode::Unlink, None).unwrap_err();
    assert_eq!(again.error, MdAttachError::Core(core::MdAttachError::UnlinkedMe));
}

#[test]
fn bind_refuses_operation_flags_and_oversized_memory() {
    let node = Node::loopback().unwrap();
    let rejected = node
        .md_bind(
            MdSpec::new(Memory::new(vec![1])).options(MdOptions::OP_PUT),
            UnlinkMode::Unlink,
            None,
        )
        .unwrap_err();
    assert_eq!(rejected.error, MdBindError::Core(core::MdBindError::OperationFlags));
    let oversized = (1 << 20) + 1;
    let rejected = node
        .md_bind(MdSpec::new(Memory::new(vec![0; oversized])), UnlinkMode::Unlink, None)
        .unwrap_err();
    assert_eq!(rejected.error, MdBindError::Core(core::MdBindError::TooLong(oversized)));
    assert_eq!(rejected.memory.len(), oversized);
}

#[test]
fn event_queue_of_another_node_is_refused() {
    let (one, other) = (Node::loopback().unwrap(), Node::loopback().unwrap());
    let foreign = other.event_queue(4);
    let rejected = one
        .md_bind(MdSpec::new(Memory::new(vec![7])), UnlinkMode::Unlink, Some(&foreign))
        .unwrap_err();
    assert_eq!(rejected.error, MdBindError::ForeignEventQueue);
    assert_eq!(rejected.memory.to_vec(), [7]);
    let me =
        one.me_attach(1, ProcessId::ANY, 0, 0, UnlinkMode::Unlink, InsertPosition::After).unwrap();
    let rejected = one.md_attach(me, sink(2), UnlinkMode::Unlink, Some(&foreign)).unwrap_err();
    assert_eq!(rejected.error, MdAttachError::ForeignEventQueue);
    assert_eq!(rejected.memory.len(), 2);
}

#[test]
fn reuse_after_unlink() {
    let node = Node::loopback().unwrap();
    let md = bound(&node);
    node.md_unlink(md).unwrap();
    assert_eq!(node.md_unlink(md), Err(MdError::Core(core::MdError::UnlinkedMd)));
    assert_eq!(
        node.put(&put_request(md, &node)),
        Err(InitiateError::Core(core::InitiateError::UnlinkedMd))
    );
    assert_eq!(
        node.with_md_memory(md, |memory| memory.len()),
        Err(MdError::Core(core::MdError::UnlinkedMd))
    );
    assert_eq!(node.md_unlink(MdHandle(0)), Err(MdError::Core(core::MdError::UnknownMd)));
}

#[test]
fn passive_md_cannot_initiate_and_busy_me_cannot_unlink() {
    let node = Node::loopback().unwrap();
    let me =
        node.me_attach(2, ProcessId::ANY, 0, 0, UnlinkMode::Unlink, InsertPosition::After).unwrap();
    let md = node.md_attach(me, sink(8), UnlinkMode::Unlink, None).unwrap();
    assert_eq!(
        node.put(&put_request(md, &node)),
        Err(InitiateError::Core(core::InitiateError::AttachedMd))
    );
    assert_eq!(node.me_unlink(me), Err(MeUnlinkError::Core(core::MeUnlinkError::MdAttached)));
}

#[test]
fn source_nid_must_be_local() {
    let node = Node::loopback().unwrap();
    let md = bound(&node);
    let foreign = nid("10.9.9.9@tcp");
    let request = PutRequest { source: Some(foreign), ..put_request(md, &node) };
    assert_eq!(
        node.put(&request),
        Err(InitiateError::Core(core::InitiateError::NotLocalSource(foreign)))
    );
}

#[test]
fn builder_errors() {
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let _first = fabric_node(&fabric, 0);
    let taken = Node::builder().mem_ni(fabric_nid(0), &fabric).build().unwrap_err();
    assert!(matches!(taken, BuildError::FabricNidTaken(nid) if nid == fabric_nid(0)));
    // 192.0.2.0/24 is TEST-NET-1: never a local address, so the listener cannot bind.
    let tunables = SocklndTunables { accept_port: 7988, ..SocklndTunables::default() };
    let tcp = Node::builder().tcp_ni(nid("192.0.2.1@tcp"), tunables).build().unwrap_err();
    assert!(matches!(tcp, BuildError::TcpListen { port: 7988, .. }), "{tcp:?}");
    let numeric = Node::builder().tcp_ni(nid("5@gni"), tunables).build().unwrap_err();
    assert!(matches!(numeric, BuildError::TcpNotIp(_)), "{numeric:?}");
    let duplicate = Node::builder()
        .mem_ni(fabric_nid(5), &fabric)
        .mem_ni(fabric_nid(5), &fabric)
        .build()
        .unwrap_err();
    assert!(matches!(duplicate, BuildError::Config(core::ConfigError::DuplicateNid(_))));
    let cpu = Node::builder().io_cpu(usize::MAX).build().unwrap_err();
    assert!(matches!(cpu, BuildError::CpuOutOfRange(usize::MAX)));
    // A failed build leaves its NIDs free.
    let _second = fabric_node(&fabric, 5);
}

#[test]
fn every_call_after_shutdown_says_so() {
    let node = Node::loopback().unwrap();
    let md = bound(&node);
    node.shutdown();
    assert!(node.is_shut_down());
    assert_eq!(
        node.me_attach(1, ProcessId::ANY, 0, 0, UnlinkMode::Unlink, InsertPosition::After),
        Err(MeAttachError::ShutDown)
    );
    let rejected =
        node.md_bind(MdSpec::new(Memory::new(vec![3])), UnlinkMode::Unlink, None).unwrap_err();
    assert_eq!((rejected.error, rejected.memory.to_vec()), (MdBindError::ShutDown, vec![3]));
    assert_eq!(node.put(&put_request(md, &node)), Err(InitiateError::ShutDown));
    assert_eq!(node.md_unlink(md), Err(MdError::ShutDown));
    assert_eq!(node.set_lazy_portal(1), Err(PortalError::ShutDown));
    assert_eq!(node.me_unlink(MeHandle(0)), Err(MeUnlinkError::ShutDown));
    let error = node.get_into(lo_target(&node), 1, 0, vec![0; 4], HANG_GUARD).unwrap_err();
    assert_eq!(error, TransferError::Bind(MdBindError::ShutDown));
}

#[test]
fn tunables_change_live_bad_ones_are_refused_and_a_closed_node_refuses() {
    let node = Node::loopback().unwrap();
    assert_eq!(node.tunables(), Tunables::default());
    let changed = Tunables { retry_count: 1, ..Tunables::default() };
    assert_eq!(node.set_tunables(changed), Ok(()));
    assert_eq!(node.tunables(), changed);
    let bad = Tunables { health_sensitivity: 1001, ..Tunables::default() };
    assert_eq!(
        node.set_tunables(bad),
        Err(SetTunablesError::Invalid(TunablesError::SensitivityTooLarge(1001)))
    );
    assert_eq!(node.tunables(), changed);
    node.shutdown();
    assert_eq!(node.set_tunables(changed), Err(SetTunablesError::ShutDown));
}
