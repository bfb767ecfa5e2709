//! The typical lst script, end to end.

use std::time::Duration;

use ulnet::proto::wire::selftest::{BrwCheck, BrwDirection, SrpcBody};
use ulnet_selftest::console::{BrwSpec, NodeState};
use ulnet_selftest::{Target, TestKind, TestSpec};

use crate::common::{Cluster, KEY, eventually};

fn brw(direction: BrwDirection, size: u32) -> TestKind {
    TestKind::Brw(BrwSpec { direction, check: BrwCheck::Full, size, offset: 0 })
}

#[test]
fn typical_script_with_two_nodes() {
    let cluster = Cluster::new(2);
    let console = &cluster.console;
    let info = console.new_session(KEY, "read/write", 0, false, 1).unwrap();
    assert_eq!(info.name, "read/write");
    console.add_group(KEY, "clients").unwrap();
    console.add_group(KEY, "servers").unwrap();
    let added = console.add_nodes(KEY, "clients", &cluster.ids(0..1)).unwrap();
    assert_eq!(added.lst_rc(), 0, "{added:?}");
    let added = console.add_nodes(KEY, "servers", &cluster.ids(1..2)).unwrap();
    assert_eq!(added.lst_rc(), 0, "{added:?}");
    assert_eq!(
        console.group_nodes(KEY, "servers").unwrap(),
        vec![(cluster.id(1), NodeState::Active)]
    );
    console.add_batch(KEY, "bulk_rw").unwrap();
    let mut write = TestSpec::new(brw(BrwDirection::Write, 4096), "clients", "servers");
    write.batch = "bulk_rw".into();
    write.concurrency = 4;
    let added = console.add_test(KEY, &write).unwrap();
    assert_eq!(added.lst_rc(), 0, "{added:?}");
    let mut read = TestSpec::new(brw(BrwDirection::Read, 1 << 20), "clients", "servers");
    read.batch = "bulk_rw".into();
    let added = console.add_test(KEY, &read).unwrap();
    assert_eq!(added.lst_rc(), 0, "{added:?}");

    let run = console.run_batch(KEY, "bulk_rw", 0).unwrap();
    assert_eq!(run.lst_rc(), 0, "{run:?}");
    let query = console.query_batch(KEY, "bulk_rw", 0, false, 5).unwrap();
    assert_eq!(query.stat.batch_running(), 1, "{query:?}");

    // Traffic flows: the servers' counters grow.
    let target = Target::Group("servers".into());
    let first = console.stat(KEY, &target, 5).unwrap();
    assert_eq!(first.lst_rc(), 0, "{first:?}");
    assert!(eventually(Duration::from_secs(10), || {
        let later = console.stat(KEY, &target, 5).unwrap();
        received(&later) > received(&first) + (4 << 20)
    }));

    let stop = console.stop_batch(KEY, "bulk_rw", false).unwrap();
    assert_eq!(stop.lst_rc(), 0, "{stop:?}");
    assert!(eventually(Duration::from_secs(10), || {
        let query = console.query_batch(KEY, "bulk_rw", 0, false, 5).unwrap();
        query.stat.batch_running() == 0 && query.stat.rpc_failure == 0
    }));

    for group in ["clients", "servers"] {
        let errors = console.stat(KEY, &Target::Group(group.into()), 10).unwrap();
        for entry in &errors.entries {
            let Some(SrpcBody::StatReply(stat)) = &entry.reply else { panic!("{entry:?}") };
            assert_eq!((stat.framework.brw_errors, stat.framework.ping_errors), (0, 0));
            assert_eq!(stat.rpc.errors, 0, "{stat:?}");
        }
    }
    let end = console.end_session(KEY).unwrap();
    assert_eq!(end.lst_rc(), 0, "{end:?}");
    for service in cluster.services.iter().flatten() {
        assert!(eventually(Duration::from_secs(5), || service.session().is_none()));
    }
}

fn received(result: &ulnet_selftest::console::TransResult) -> u64 {
    result
        .entries
        .iter()
        .map(|entry| match &entry.reply {
            Some(SrpcBody::StatReply(stat)) => stat.lnet.receive_length + stat.lnet.send_length,
            _ => 0,
        })
        .sum()
}
