#![no_main]
//! Acceptor connreq: total on any bytes, the decision for a prefix never changes as more bytes
//! arrive, `NeedMore` never over-asks, and a request re-encodes to what was parsed.

use libfuzzer_sys::fuzz_target;
use ulnet_proto::wire::acceptor::{ConnReq, ConnReqParse};
use ulnet_proto::wire::hello::ByteOrder;

fuzz_target!(|data: &[u8]| {
    let full = ConnReq::parse(data);

    // Incremental use: a reader calls parse again each time bytes arrive.
    for cut in 0..data.len().min(ConnReq::V2_LEN + 1) {
        match ConnReq::parse(&data[..cut]) {
            Ok(ConnReqParse::NeedMore(more)) => {
                assert!(more >= 1, "NeedMore(0) at {cut}");
                // "At least `more` bytes": one fewer is still undecided.
                if let Some(shorter) = data.get(..cut + more - 1) {
                    assert!(
                        matches!(ConnReq::parse(shorter), Ok(ConnReqParse::NeedMore(_))),
                        "NeedMore({more}) at {cut} over-asks"
                    );
                }
            }
            decided => assert_eq!(decided, full, "prefix of {cut} bytes decided differently"),
        }
    }

    if let Ok(ConnReqParse::Request { request, len, .. }) = full {
        assert!(len <= data.len());
        assert_eq!(len, request.buffer_len());
        let mut out = [0u8; ConnReq::V2_LEN];
        let written = request.emit(&mut out).expect("a parsed request re-encodes");
        assert_eq!(written, len);
        assert_eq!(
            ConnReq::parse(&out[..written]),
            Ok(ConnReqParse::Request { request, byte_order: ByteOrder::LittleEndian, len }),
        );
        // Too small a buffer is an error, never a panic.
        assert!(request.emit(&mut out[..len - 1]).is_err());
    }
});
