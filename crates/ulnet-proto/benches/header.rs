//! Parse and emit of a PUT header in both wire forms: the per-message hot path.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // Test, bench and example code outside #[test] functions.

use std::hint::black_box;
use std::net::Ipv4Addr;

use criterion::{Criterion, criterion_group, criterion_main};
use ulnet_proto::addr::{Net, Nid};
use ulnet_proto::wire::header::{Body, Header, HeaderForm, WireHandle};

fn put() -> Header {
    Header {
        dest_nid: Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 1)),
        src_nid: Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 2)),
        dest_pid: 12345,
        src_pid: 12345,
        payload_length: 4096,
        body: Body::Put {
            ack_wmd: WireHandle { interface_cookie: 0x1870_F7D9_3B1D_2A00, object_cookie: 0x40d },
            match_bits: 0x0000_0000_0001_0203,
            hdr_data: 0x55,
            ptl_index: 4,
            offset: 0,
        },
    }
}

fn bench(c: &mut Criterion) {
    let header = put();
    for (name, form) in [("nid4", HeaderForm::Nid4), ("nid16", HeaderForm::Nid16)] {
        let mut bytes = [0u8; 96];
        let len = header.emit(form, &mut bytes).unwrap_or_default();
        let bytes = &bytes[..len];
        c.bench_function(&format!("parse_put_{name}"), |b| {
            b.iter(|| Header::parse(black_box(bytes), black_box(form)))
        });
        c.bench_function(&format!("emit_put_{name}"), |b| {
            let mut out = [0u8; 96];
            b.iter(|| {
                let written = black_box(&header).emit(black_box(form), &mut out);
                black_box(&out);
                written
            })
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
