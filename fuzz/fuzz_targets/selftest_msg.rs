#![no_main]
//! lnet_selftest: `srpc_msg` parse is total; a parsed message re-encodes in the sender's order and
//! in ours and parses back to itself (reserved words and bytes after a name's NUL are dropped,
//! as documented). The server's request check agrees with the parsed type. The destination list
//! decoder is total, bounded by `SFW_MAX_NDESTS`, and inverts the encoder.

use libfuzzer_sys::fuzz_target;
use ulnet_proto::wire::selftest::{
    ByteOrder, SRPC_MSG_LEN, SrpcMsg, SrpcService, check_request, decode_dest_list,
    encode_dest_list, max_dest_count,
};

fuzz_target!(|data: &[u8]| {
    let (message, rest) = data.split_at(data.len().min(SRPC_MSG_LEN));
    if let Ok((msg, order)) = SrpcMsg::parse(message) {
        assert_eq!(SrpcMsg::parse(&msg.emit_in(order)), Ok((msg.clone(), order)));
        assert_eq!(SrpcMsg::parse(&msg.emit()), Ok((msg.clone(), ByteOrder::LittleEndian)));
        for service in SrpcService::ALL {
            if service.request_type() == msg.msg_type() {
                assert_eq!(check_request(message, service), Ok(order));
            }
        }
    } else {
        for service in SrpcService::ALL {
            let _ = check_request(message, service);
        }
    }

    // Destination list: [count u32][page size selector][bytes...].
    let Some((count, rest)) = rest.split_first_chunk::<4>() else {
        return;
    };
    let Some((&selector, list)) = rest.split_first() else {
        return;
    };
    let count = u32::from_le_bytes(*count);
    let page_size = [4096, 65536, 12, 100, 0][usize::from(selector % 5)];
    let order = if selector & 0x80 == 0 { ByteOrder::LittleEndian } else { ByteOrder::BigEndian };
    if let Ok(ids) = decode_dest_list(list, count, page_size, order) {
        assert_eq!(ids.len(), count as usize);
        assert!(ids.len() <= max_dest_count(page_size));
        if order == ByteOrder::LittleEndian {
            let encoded = encode_dest_list(&ids, page_size).expect("decoded ids re-encode");
            assert_eq!(decode_dest_list(&encoded, count, page_size, order), Ok(ids));
        }
    }
});
