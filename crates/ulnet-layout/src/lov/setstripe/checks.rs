//! Whole-request checks: DoM components and llapi's layout sanity rules.

use super::error::SetstripeError;
use super::{Args, ComponentRequest};
use crate::lov::{LCME_FL_EXTENSION, LOV_PATTERN_MDT, LUSTRE_EOF};

/// The options a Data-on-MDT component must not carry.
// lustre: lustre/utils/lfs.c comp_args_to_layout() (the LLAPI_LAYOUT_MDT branch)
pub(super) fn check_dom(a: &Args, start: u64) -> Result<(), SetstripeError> {
    if let Some(count) = a.stripe_count.filter(|&c| c != 0) {
        return Err(SetstripeError::DomStripeCount(count));
    }
    if let Some(size) = a.stripe_size.filter(|&s| s != a.end.saturating_sub(start) && s != a.end) {
        return Err(SetstripeError::DomStripeSize(size));
    }
    if !a.osts.is_empty() {
        return Err(SetstripeError::DomOstList(a.osts.len()));
    }
    if let Some(offset) = a.stripe_offset.filter(|&o| o != 0) {
        return Err(SetstripeError::DomStripeOffset(offset));
    }
    if let Some(pool) = &a.pool {
        return Err(SetstripeError::DomPool(pool.clone()));
    }
    Ok(())
}

/// The checks llapi applies to a finished composite request.
// lustre: lustre/utils/liblustreapi_layout.c llapi_layout_sanity_cb(), llapi_layout_strerror[]
pub(super) fn sanity(components: &[ComponentRequest]) -> Result<(), SetstripeError> {
    let mut previous: Option<&ComponentRequest> = None;
    for (index, c) in components.iter().enumerate() {
        let next_is_extension =
            components.get(index + 1).is_some_and(|n| n.flags & LCME_FL_EXTENSION != 0);
        if c.pattern == LOV_PATTERN_MDT && index != 0 {
            return Err(SetstripeError::Sanity(
                "DoM component should be the first one in a file/mirror",
            ));
        }
        if c.flags & LCME_FL_EXTENSION != 0 {
            let base = previous.map_or(0, |p| p.stripe_size);
            if previous.is_some_and(|p| p.pattern == LOV_PATTERN_MDT) {
                return Err(SetstripeError::Sanity(
                    "DoM components cannot be followed by extension space",
                ));
            }
            if base != 0 && c.stripe_size % base != 0 {
                return Err(SetstripeError::Sanity(
                    "The extension size must be aligned by the stripe size",
                ));
            }
        } else if c.start == c.end && !next_is_extension {
            return Err(SetstripeError::Sanity(
                "Zero length components must be followed by extension",
            ));
        }
        if c.end < c.start {
            return Err(SetstripeError::Sanity(
                "Component end is before end of previous component",
            ));
        }
        if c.end != LUSTRE_EOF
            && c.stripe_size != 0
            && c.flags & LCME_FL_EXTENSION == 0
            && c.end % c.stripe_size != 0
        {
            return Err(SetstripeError::Sanity(
                "The component end must be aligned by the stripe size",
            ));
        }
        previous = Some(c);
    }
    Ok(())
}
