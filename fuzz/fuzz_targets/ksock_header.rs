#![no_main]
//! ksock header: parse in both byte orders is total and re-encodes byte for byte; ZC-ACK
//! decode/encode are consistent (decode of an encoding gives the same acknowledgement, count,
//! membership and iteration agree); cookie allocation never yields 0 or the keepalive cookie.

use libfuzzer_sys::fuzz_target;
use ulnet_proto::wire::hello::ByteOrder;
use ulnet_proto::wire::ksock::{
    FIRST_ZC_COOKIE, KsockHeader, KsockMsgType, MAX_ZC_ACK_RANGE, SOCKNAL_KEEPALIVE_PING, ZcAck,
    ZcAckError, next_zc_cookie,
};

/// Cookie lists longer than this are checked through `contains` only.
const ITERATE_MAX: u64 = 4096;

fuzz_target!(|data: &[u8]| {
    for order in [ByteOrder::LittleEndian, ByteOrder::BigEndian] {
        let Ok(header) = KsockHeader::parse(data, order) else {
            continue;
        };
        assert_eq!(header.emit_ordered(order)[..], data[..KsockHeader::LEN]);
        if order == ByteOrder::LittleEndian {
            assert_eq!(header.emit(), header.emit_ordered(order));
        }
        match header.zc_request() {
            Some(cookie) => {
                assert_eq!(header.msg_type, KsockMsgType::Lnet);
                assert_ne!(cookie, 0);
            }
            None => assert!(header.msg_type == KsockMsgType::Noop || header.zc_cookies[0] == 0),
        }
        if let Ok(ack) = header.zc_ack() {
            check_decoded(ack);
            if header.msg_type == KsockMsgType::Noop {
                assert_eq!(ZcAck::decode(header.zc_cookies), Ok(ack));
            }
        }
    }

    // Hand-built acknowledgements (cookies at least FIRST_ZC_COOKIE, as `encode` requires).
    if let Some((&tag, rest)) = data.split_first() {
        let word = |at: usize| {
            let bytes = rest.get(at..at + 8).and_then(|b| <[u8; 8]>::try_from(b).ok());
            bytes.map_or(FIRST_ZC_COOKIE, u64::from_le_bytes).max(FIRST_ZC_COOKIE)
        };
        let (a, b) = (word(0), word(8));
        let built = match tag % 5 {
            0 => ZcAck::None,
            1 => ZcAck::Keepalive,
            2 => ZcAck::Single(a),
            3 => ZcAck::Pair(a, b),
            _ => {
                // Mostly short ranges, so iteration is exercised.
                let b = if tag & 0x80 == 0 { a.saturating_add(b % 64) } else { b };
                ZcAck::Range(a, b)
            }
        };
        match ZcAck::decode(built.encode()) {
            Ok(decoded) => {
                assert_eq!(decoded.count(), built.count(), "{built:?} -> {decoded:?}");
                for cookie in [a, b, a.wrapping_add(1), b.wrapping_sub(1)] {
                    assert_eq!(decoded.contains(cookie), built.contains(cookie));
                }
                if built.count() <= ITERATE_MAX {
                    assert!(decoded.cookies().eq(built.cookies()));
                }
                check_decoded(decoded);
            }
            Err(ZcAckError::RangeTooLong { low, high }) => {
                assert!(matches!(built, ZcAck::Range(..)));
                assert!(high - low >= MAX_ZC_ACK_RANGE, "{built:?}");
            }
            Err(error) => panic!("{built:?} encodes to something decode rejects: {error:?}"),
        }
    }

    if let Some(bytes) = data.first_chunk::<8>() {
        let next = next_zc_cookie(u64::from_le_bytes(*bytes));
        assert!(next >= FIRST_ZC_COOKIE);
    }
});

/// Properties of any acknowledgement `decode` produced.
fn check_decoded(ack: ZcAck) {
    assert_eq!(ZcAck::decode(ack.encode()), Ok(ack), "decode is not canonical for {ack:?}");
    let count = ack.count();
    assert!(count <= MAX_ZC_ACK_RANGE);
    assert!(!ack.contains(0));
    // (0, 1) and (1, 1) are keepalives; only a range may start at the keepalive cookie.
    if ack.contains(SOCKNAL_KEEPALIVE_PING) {
        assert!(matches!(ack, ZcAck::Range(SOCKNAL_KEEPALIVE_PING, _)), "{ack:?}");
    }
    let (low, high) = ack.cookies().size_hint();
    assert_eq!(Some(low), high);
    assert_eq!(low as u64, count);
    if count <= ITERATE_MAX {
        let cookies: Vec<u64> = ack.cookies().collect();
        assert_eq!(cookies.len() as u64, count);
        assert!(cookies.iter().all(|&c| ack.contains(c)));
        assert!(cookies.windows(2).all(|w| w[0] < w[1]));
    }
}
