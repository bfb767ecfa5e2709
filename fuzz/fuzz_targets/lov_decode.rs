#![no_main]
//! LOV layout xattrs: `Layout::decode` is total; what decodes re-encodes to bytes that decode
//! to the same layout, and the printers and offset arithmetic never panic on it.

use libfuzzer_sys::fuzz_target;
use ulnet_layout::lov::Layout;
use ulnet_layout::lov::getstripe::{GetstripeOptions, getstripe};
use ulnet_layout::lov::map::{map_offset, split_extent};

fuzz_target!(|data: &[u8]| {
    let Ok(layout) = Layout::decode(data) else { return };
    let bytes = match layout.encode() {
        Ok(bytes) => bytes,
        Err(error) => panic!("decoded layout does not encode: {error}"),
    };
    assert_eq!(Layout::decode(&bytes).as_ref(), Ok(&layout));

    for args in [&[][..], &["-v"][..], &["-y"][..], &["-c"][..], &["-z"][..], &["-I", "-E"][..]] {
        if let Ok((mut options, _)) = GetstripeOptions::parse(args) {
            let _ = getstripe(&layout, &options);
            options.directory = true;
            let _ = getstripe(&layout, &options);
        }
    }
    let offset = data.iter().fold(0u64, |acc, &b| acc.rotate_left(8) ^ u64::from(b));
    let _ = map_offset(&layout, offset, 7);
    let _ =
        split_extent(&layout, offset % (1 << 40), offset % (1 << 40) + 1 + offset % (1 << 24), 7);
});
