//! `ulnetd demo`, README's first command: it runs to the end and checks its own data.

use ulnetd::demo::{DemoLnd, demo};

fn run(lnd: DemoLnd) -> String {
    let mut out = Vec::new();
    demo(&mut out, lnd).unwrap();
    String::from_utf8(out).unwrap()
}

fn assert_complete(text: &str) {
    assert!(text.contains("ulnetd: ready 0@lo,127.0.0.2@tcp control"), "{text}");
    assert!(text.contains("ulnetd: ready 0@lo,127.0.0.3@tcp control"), "{text}");
    assert!(text.contains("ping:\n- primary nid: 127.0.0.3@tcp"), "{text}");
    assert!(text.contains("discover:\n- primary nid: 127.0.0.3@tcp\n  Multi-Rail: true"), "{text}");
    assert_eq!(text.matches("data verified").count(), 2, "{text}");
    assert!(text.contains("statistics:\n"), "{text}");
    assert!(!text.contains("(exit status"), "every ulnetctl command succeeds: {text}");
    assert!(text.ends_with("control sockets removed: true\n"), "{text}");
}

#[test]
fn the_demo_runs_over_the_in_process_fabric() {
    assert_complete(&run(DemoLnd::Mem));
}

#[test]
fn the_demo_runs_over_tcp() {
    let text = run(DemoLnd::Tcp);
    assert!(text.starts_with("# ulnetd demo: two nodes over TCP"), "{text}");
    assert_complete(&text);
}
