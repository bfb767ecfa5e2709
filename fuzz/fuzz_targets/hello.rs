#![no_main]
//! socklnd hello: both incremental entry points (`parse_prefix`, `parse`) are total, agree with
//! each other, never change a decision as bytes arrive, and a parsed hello re-encodes in the
//! sender's byte order to itself. The passive side's answer encodes and parses back too.

use libfuzzer_sys::fuzz_target;
use ulnet_proto::wire::hello::{
    ConnType, Hello, HelloError, HelloParse, HelloPrefixParse, LocalIdentity, passive_conn_type,
};

fuzz_target!(|data: &[u8]| {
    let full = Hello::parse(data);
    let prefix = Hello::parse_prefix(data);

    // parse() starts with parse_prefix(): same verdict on the magic and version.
    match (&prefix, &full) {
        (Err(a), Err(b)) if a == b => {}
        (Err(a), other) => panic!("parse_prefix failed with {a:?}, parse gave {other:?}"),
        (Ok(HelloPrefixParse::NeedMore(a)), Ok(HelloParse::NeedMore(b))) => assert_eq!(a, b),
        (Ok(HelloPrefixParse::UnknownVersion(a)), Ok(HelloParse::UnknownVersion(b))) => {
            assert_eq!(a, b)
        }
        (Ok(HelloPrefixParse::Version { version, byte_order }), full) => match full {
            Ok(HelloParse::Complete { hello, byte_order: order, .. }) => {
                assert_eq!((hello.version, *order), (*version, *byte_order));
            }
            Ok(HelloParse::NeedMore(_)) | Err(_) => {}
            Ok(HelloParse::UnknownVersion(_)) => panic!("known prefix, unknown version"),
        },
        (prefix, full) => panic!("parse_prefix gave {prefix:?}, parse gave {full:?}"),
    }

    for cut in 0..data.len().min(Hello::MAX_LEN + 1) {
        match Hello::parse(&data[..cut]) {
            Ok(HelloParse::NeedMore(more)) => {
                assert!(more >= 1, "NeedMore(0) at {cut}");
                if let Some(shorter) = data.get(..cut + more - 1) {
                    assert!(
                        matches!(Hello::parse(shorter), Ok(HelloParse::NeedMore(_))),
                        "NeedMore({more}) at {cut} over-asks"
                    );
                }
            }
            decided => assert_eq!(decided, full, "prefix of {cut} bytes decided differently"),
        }
    }

    let Ok(HelloParse::Complete { hello, byte_order, len }) = full else {
        return;
    };
    assert!(len <= data.len() && len <= Hello::MAX_LEN);
    assert_eq!(len, hello.buffer_len());
    let mut out = [0u8; Hello::MAX_LEN];
    let written = hello.emit_ordered(&mut out, byte_order).expect("a parsed hello re-encodes");
    assert_eq!(written, len);
    assert_eq!(
        Hello::parse(&out[..written]),
        Ok(HelloParse::Complete { hello: hello.clone(), byte_order, len }),
    );

    // The acceptor's answer, in the received version.
    if let Ok(own) = passive_conn_type(hello.conn_type) {
        assert_ne!(own, ConnType::NONE);
        let local = LocalIdentity { nid: hello.dst_nid, pid: 12345, incarnation: 1 };
        let reply = Hello::passive_reply(&local, &hello, hello.src_nid, own);
        let mut out = [0u8; Hello::MAX_LEN];
        // A large NID has no V1-V3 form: emit refuses rather than truncate.
        if let Ok(written) = reply.emit(&mut out) {
            let parsed = Hello::parse(&out[..written]);
            if reply.src_nid.is_any() {
                assert_eq!(parsed, Err(HelloError::SrcNidAny));
            } else {
                let Ok(HelloParse::Complete { hello: parsed, .. }) = parsed else {
                    panic!("reply {reply:?} parsed as {parsed:?}");
                };
                assert_eq!(
                    (parsed.version, parsed.src_nid, parsed.src_pid, parsed.conn_type),
                    (reply.version, reply.src_nid, reply.src_pid, own)
                );
            }
        }
    }
});
