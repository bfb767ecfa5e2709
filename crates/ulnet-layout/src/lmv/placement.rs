//! Where a name lives in a striped directory's layout, flags included: layout changes
//! (migration, split, merge) evaluate an old and a new layout, and a bad hash type leaves the
//! name on any stripe (docs/protocol/dirlayouts.md §3.6).

use super::{HashTypeField, LmvMdsMd, PlacementError, stripe_index};

/// A layout change in progress, from the flags of the hash type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LayoutChange {
    /// `MIGRATION` alone: the target stripes (`migrate_offset` of them, hashed with the hash
    /// type) come first, the source stripes (hashed with `migrate_hash`) after them.
    Migration,
    /// `MIGRATION|SPLIT`: the old layout is the first `migrate_offset` stripes under
    /// `migrate_hash`; the new one is every stripe under the hash type.
    Split,
    /// `MIGRATION|MERGE`: the old layout is every stripe under the hash type; the new one is
    /// the first `migrate_offset` stripes under `migrate_hash`.
    Merge,
}

/// Where a name is placed, as the client looks it up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Placement {
    /// On this stripe.
    Stripe(u32),
    /// The hash type is bad (flagged `BAD_TYPE`, or unknown): the client tries every stripe
    /// in order from 0.
    AnyStripe,
    /// A layout change is in progress: new names go to `new`; lookups try `new`, then `old`.
    Changing { new: u32, old: u32 },
}

/// The placement of `name` in a directory with `layout`.
// lustre: lustre/lmv/lmv_internal.h lsm_name_to_stripe_info(), lmv_dir_retry_check_update()
pub fn place_name(layout: &LmvMdsMd, name: &[u8]) -> Result<Placement, PlacementError> {
    if name.is_empty() {
        return Err(PlacementError::EmptyName);
    }
    if layout.hash_type.is_bad() && layout.stripe_count > 1 {
        return Ok(Placement::AnyStripe);
    }
    let index = |new_layout| {
        layout_stripe_index(
            layout.hash_type,
            layout.stripe_count,
            layout.migrate_hash,
            layout.migrate_offset,
            name,
            new_layout,
        )
    };
    if layout.hash_type.layout_change().is_some() {
        return Ok(Placement::Changing { new: index(true)?, old: index(false)? });
    }
    index(true).map(Placement::Stripe)
}

/// The stripe of `name` in the new (`new_layout`) or old layout of a directory with these
/// layout fields; without a layout change both are the same.
// lustre: lustre/include/lustre_lmv.h __lmv_name_to_stripe_index()
pub fn layout_stripe_index(
    hash_type: HashTypeField,
    stripe_count: u32,
    migrate_hash: HashTypeField,
    migrate_offset: u32,
    name: &[u8],
    new_layout: bool,
) -> Result<u32, PlacementError> {
    use super::LayoutChange::{Merge, Migration, Split};
    let inconsistent = PlacementError::InconsistentChange { stripe_count, migrate_offset };
    if stripe_count == 0 {
        return Err(PlacementError::NoStripes);
    }
    // The layout evaluated, and where its stripes start in the stripe list.
    let (hash, count, first) = match (hash_type.layout_change(), new_layout) {
        (Some(Split), false) | (Some(Merge), true) => (migrate_hash, migrate_offset, 0),
        (Some(Migration), true) => (hash_type, migrate_offset, 0),
        (Some(Migration), false) => {
            let source = stripe_count.checked_sub(migrate_offset).ok_or(inconsistent.clone())?;
            (migrate_hash, source, migrate_offset)
        }
        _ => (hash_type, stripe_count, 0),
    };
    // An evaluated layout wider than the stripes present cannot hold the name (and would make
    // CRUSH loop over a count read from input).
    if count > stripe_count {
        return Err(inconsistent);
    }
    let index = if count > 1 {
        let known = hash.hash_type().ok_or(PlacementError::UnknownHashType(hash.code()))?;
        stripe_index(known, count, name)?
    } else {
        0
    };
    let index = first.checked_add(index).ok_or(inconsistent.clone())?;
    if count == 0 || index >= stripe_count {
        return Err(inconsistent);
    }
    Ok(index)
}

#[cfg(test)]
mod tests;
