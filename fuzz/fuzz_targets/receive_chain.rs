#![no_main]
//! The whole passive receive chain (`StreamDecoder`): connreq, hello, then framed messages with
//! their LNet headers, receive checks, payloads and the ping / selftest decoders inside them.
//! Items tile the input in order, payloads are exactly `payload_length` bytes, and every decoded
//! message passed the receive checks. A second pass starts after the hellos with the version and
//! byte order picked by the first byte, so the framing is reached without a valid handshake.

use libfuzzer_sys::fuzz_target;
use ulnet_proto::wire::header::LNET_MTU;
use ulnet_proto::wire::hello::{ByteOrder, ProtoVersion};
use ulnet_proto::wire::ksock::KsockMsgType;
use ulnet_proto::wire::stream::{PayloadContent, StreamDecoder, StreamEvent};

fuzz_target!(|data: &[u8]| {
    check(data, StreamDecoder::new(data));
    if let Some((&selector, rest)) = data.split_first() {
        let version = [ProtoVersion::V1, ProtoVersion::V2, ProtoVersion::V3, ProtoVersion::V4]
            [usize::from(selector & 3)];
        let order = if selector & 4 == 0 { ByteOrder::LittleEndian } else { ByteOrder::BigEndian };
        check(rest, StreamDecoder::after_hello(rest, version, order));
    }
});

fn check(input: &[u8], decoder: StreamDecoder<'_>) {
    let mut next = 0;
    let mut stopped = false;
    for result in decoder {
        assert!(!stopped, "an item after a closing item");
        let item = match result {
            Ok(item) => item,
            Err(error) => {
                assert_eq!(error.offset, next);
                continue;
            }
        };
        assert_eq!(item.offset, next);
        next = item.offset + item.len;
        assert!(next <= input.len());
        match &item.event {
            StreamEvent::Message(message) => {
                assert_eq!(message.payload.len(), message.header.payload_length as usize);
                assert!(message.header.payload_length <= LNET_MTU);
                assert_eq!(message.header.validate_received(), Ok(()));
                if let Some(ksock) = message.ksock {
                    assert_eq!(ksock.msg_type, KsockMsgType::Lnet);
                }
                let end = input[item.offset..next].as_ptr_range().end;
                assert_eq!(message.payload.as_ptr_range().end, end, "payload ends the item");
                match &message.content {
                    PayloadContent::Ping(Ok((_, used))) => assert!(*used <= message.payload.len()),
                    PayloadContent::Selftest(Ok((msg, _))) => {
                        assert_eq!(message.payload.len(), 160);
                        let _ = msg.msg_type();
                    }
                    _ => {}
                }
            }
            StreamEvent::Downgrade(_) | StreamEvent::UnknownHelloVersion(_) => stopped = true,
            StreamEvent::ConnReq { .. } | StreamEvent::Hello { .. } | StreamEvent::Noop { .. } => {}
        }
    }
}
