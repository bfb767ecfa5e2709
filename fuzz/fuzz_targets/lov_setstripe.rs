#![no_main]
//! The `lfs setstripe` grammar on arbitrary argument lists: parsing is total, what parses
//! encodes to an xattr that decodes to the same layout, and its canonical options parse back
//! to that layout.

use libfuzzer_sys::fuzz_target;
use ulnet_layout::lov::Layout;
use ulnet_layout::lov::setstripe::Setstripe;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let args: Vec<&str> = text.split(' ').collect();
    let Ok(setstripe) = Setstripe::parse(&args) else { return };
    let layout = setstripe.to_layout();
    if let Ok(bytes) = layout.encode() {
        assert_eq!(Layout::decode(&bytes).as_ref(), Ok(&layout));
    }
    let again = Setstripe::parse(&setstripe.to_args()).map(|s| s.to_layout());
    assert_eq!(again.as_ref(), Ok(&layout), "{:?}", setstripe.to_args());
});
