//! NID text parse and print: an IPv4 tcp NID, an IPv6 NID and a numeric NID.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use ulnet_proto::addr::Nid;

const CASES: [(&str, &str); 3] = [
    ("ipv4_tcp", "192.168.100.254@tcp1"),
    ("ipv6_tcp", "2001:db8:85a3::8a2e:370:7334@tcp"),
    ("numeric_kfi", "0x1f2e3d4c@kfi7"),
];

fn nid_text(c: &mut Criterion) {
    for (name, text) in CASES {
        let Ok(nid) = text.parse::<Nid>() else {
            panic!("benchmark NID {text} does not parse");
        };
        c.bench_function(&format!("parse/{name}"), |b| b.iter(|| black_box(text).parse::<Nid>()));
        c.bench_function(&format!("print/{name}"), |b| b.iter(|| black_box(nid).to_string()));
    }
}

criterion_group!(benches, nid_text);
criterion_main!(benches);
