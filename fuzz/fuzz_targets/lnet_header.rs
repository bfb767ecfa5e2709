#![no_main]
//! LNet header, both forms: parse is total; a parsed header re-emits and re-parses to the same
//! `Header`; the raw field peeks and the framer's length agree with it; a header whose NIDs have
//! nid4 forms converts between the forms without change.

use libfuzzer_sys::fuzz_target;
use ulnet_proto::wire::header::{
    Header, HeaderEmitError, HeaderError, HeaderForm, raw_msg_type, raw_payload_length,
};
use ulnet_proto::wire::ksock::lnet_payload_length;

fuzz_target!(|data: &[u8]| {
    for form in [HeaderForm::Nid4, HeaderForm::Nid16] {
        let parsed = Header::parse(data, form);
        let header = match parsed {
            Ok(header) => header,
            Err(HeaderError::Truncated { needed, len }) => {
                assert_eq!((needed, len), (form.len(), data.len()));
                assert!(raw_msg_type(data, form).is_err());
                assert!(raw_payload_length(data, form).is_err());
                continue;
            }
            Err(_) => continue,
        };
        assert_eq!(raw_msg_type(data, form), Ok(header.msg_type() as u32));
        assert_eq!(raw_payload_length(data, form), Ok(header.payload_length));
        assert_eq!(lnet_payload_length(form, data), Ok(header.payload_length));
        let _ = header.validate_received();

        let mut out = [0u8; Header::NID16_LEN];
        let written = header.emit(form, &mut out).expect("a parsed header re-emits in its form");
        assert_eq!(written, form.len());
        assert_eq!(Header::parse(&out[..written], form), Ok(header), "{form:?} round trip");
        assert!(matches!(
            header.emit(form, &mut out[..form.len() - 1]),
            Err(HeaderEmitError::BufferTooSmall { .. })
        ));

        // Across forms: every header has a nid16 form; a nid4 form iff both NIDs have one.
        let wide = header.emit_nid16();
        assert_eq!(Header::parse(&wide, HeaderForm::Nid16), Ok(header));
        match header.emit_nid4() {
            Ok(narrow) => {
                assert!(header.dest_nid.is_nid4() && header.src_nid.is_nid4());
                assert_eq!(Header::parse(&narrow, HeaderForm::Nid4), Ok(header));
            }
            Err(HeaderEmitError::DestNidNotNid4(_)) => assert!(!header.dest_nid.is_nid4()),
            Err(HeaderEmitError::SrcNidNotNid4(_)) => assert!(!header.src_nid.is_nid4()),
            Err(error) => panic!("emit_nid4 failed with {error:?}"),
        }
    }
});
