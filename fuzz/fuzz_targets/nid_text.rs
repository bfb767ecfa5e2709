#![no_main]
//! NID text: `Nid`, `Net`, `ProcessId`, `NidRange` and `NidList` parsing is total on any UTF-8;
//! printing a parsed value gives text that parses back to it (and prints the same); expanding a
//! nidlist with a small limit never allocates beyond the limit, and every NID it yields matches.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use libfuzzer_sys::fuzz_target;
use ulnet_proto::addr::{Net, Nid, NidList, NidRange, ProcessId, RangeError};

/// Records the largest single allocation while armed.
struct LargestAllocation;

static ARMED: AtomicBool = AtomicBool::new(false);
static LARGEST: AtomicUsize = AtomicUsize::new(0);

fn record(size: usize) {
    if ARMED.load(Ordering::Relaxed) {
        LARGEST.fetch_max(size, Ordering::Relaxed);
    }
}

// Safety: every method forwards to the system allocator unchanged; it only observes sizes.
unsafe impl GlobalAlloc for LargestAllocation {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: LargestAllocation = LargestAllocation;

/// Parses `text`; on success printing and re-parsing must give the same value and text.
fn round_trip<T>(text: &str)
where
    T: std::str::FromStr + std::fmt::Display + std::fmt::Debug + PartialEq,
    T::Err: std::fmt::Debug,
{
    let Ok(value) = text.parse::<T>() else {
        return;
    };
    let printed = value.to_string();
    match printed.parse::<T>() {
        Ok(again) => {
            assert_eq!(again, value, "{text:?} printed as {printed:?}");
            assert_eq!(again.to_string(), printed);
        }
        Err(error) => panic!("{text:?} parsed to {value:?}, printed {printed:?}: {error:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    round_trip::<Nid>(text);
    round_trip::<Net>(text);
    round_trip::<ProcessId>(text);
    round_trip::<NidRange>(text);
    round_trip::<NidList>(text);

    let Ok(list) = NidList::parse(text) else {
        return;
    };
    let limit = text.len() % 33;
    LARGEST.store(0, Ordering::Relaxed);
    ARMED.store(true, Ordering::Relaxed);
    let expanded = list.expand(limit);
    ARMED.store(false, Ordering::Relaxed);
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(
        largest <= limit * size_of::<Nid>(),
        "expand({limit}) of {text:?} allocated {largest} bytes"
    );
    match expanded {
        Ok(nids) => {
            assert!(nids.len() <= limit);
            assert!(nids.iter().all(|nid| list.matches(nid)), "{text:?} expands to a non-match");
        }
        Err(RangeError::TooManyNids { count, limit: reported }) => {
            assert_eq!(reported, limit);
            assert!(count > limit as u128);
        }
        Err(RangeError::WildcardNotExpandable) => {}
    }
});
