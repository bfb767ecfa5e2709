//! The name hashes: a directory entry's name to the index of the stripe that holds it.
//! Definitions: docs/protocol/dirlayouts.md §3.

use super::{HashType, LMV_MAX_STRIPE_COUNT, PlacementError, crush_stem};

/// Placement groups CRUSH spreads over the stripes.
// lustre: include/uapi/linux/lustre/lustre_idl.h LMV_CRUSH_PG_COUNT
pub const LMV_CRUSH_PG_COUNT: u32 = 4096;

const FNV_1A_64_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_1A_64_PRIME: u64 = 0x0000_0100_0000_01b3;
const CRUSH_SEED: u32 = 1_315_423_911;

/// The stripe of `stripe_count` that `name` lands on under `hash`, with no layout change in
/// progress (see [`place_name`](super::place_name) for that). One stripe or none gives 0;
/// more than [`LMV_MAX_STRIPE_COUNT`] is refused.
// lustre: lustre/include/lustre_lmv.h __lmv_name_to_stripe_index()
pub fn stripe_index(hash: HashType, stripe_count: u32, name: &[u8]) -> Result<u32, PlacementError> {
    if name.is_empty() {
        return Err(PlacementError::EmptyName);
    }
    if stripe_count > LMV_MAX_STRIPE_COUNT {
        return Err(PlacementError::TooManyStripes(stripe_count));
    }
    if stripe_count <= 1 {
        return Ok(0);
    }
    Ok(match hash {
        HashType::AllChar => all_char(name) % stripe_count,
        // The remainder of a u32 divisor fits in u32.
        HashType::Fnv1a64 => (fnv_1a_64(name) % u64::from(stripe_count)) as u32,
        HashType::Crush => crush(stripe_count, name, false),
        HashType::Crush2 => crush(stripe_count, name, true),
    })
}

/// Sum of the name's bytes, as unsigned 32-bit wrapping arithmetic.
// lustre: lustre/include/lustre_lmv.h lmv_hash_all_chars()
pub fn all_char(name: &[u8]) -> u32 {
    name.iter().fold(0u32, |sum, &byte| sum.wrapping_add(u32::from(byte)))
}

/// 64-bit FNV-1a: per byte, XOR into the state, then multiply by the prime.
// lustre: include/uapi/linux/lustre/lustre_idl.h lustre_hash_fnv_1a_64()
pub fn fnv_1a_64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_1A_64_OFFSET_BASIS, |state, &byte| {
        (state ^ u64::from(byte)).wrapping_mul(FNV_1A_64_PRIME)
    })
}

/// The CRUSH placement group of a name: FNV-1a of its stem modulo [`LMV_CRUSH_PG_COUNT`].
/// `crush2` selects the corrected temp-file rule (see [`crush_stem`]).
pub fn crush_placement_group(name: &[u8], crush2: bool) -> u32 {
    (fnv_1a_64(crush_stem(name, crush2)) % u64::from(LMV_CRUSH_PG_COUNT)) as u32
}

/// Ceph's `crush_hash32_rjenkins1_2`: Bob Jenkins' 96-bit mix applied three times to the
/// two inputs, the seed, and the constants 231232 and 1232.
// lustre: lustre/include/lustre_lmv.h crush_hash(), crush_hashmix()
pub fn crush_hash32_2(a: u32, b: u32) -> u32 {
    let hash = CRUSH_SEED ^ a ^ b;
    let (a, b, hash) = jenkins_mix(a, b, hash);
    let (_, _, hash) = jenkins_mix(231_232, a, hash);
    let (_, _, hash) = jenkins_mix(b, 1232, hash);
    hash
}

/// CRUSH straw selection: the stripe whose straw for the name's placement group is highest;
/// ties keep the lowest index, and all-zero straws give 0.
// lustre: lustre/include/lustre_lmv.h lmv_hash_crush()
fn crush(stripe_count: u32, name: &[u8], crush2: bool) -> u32 {
    let group = crush_placement_group(name, crush2);
    let mut best = (0u32, 0u32);
    for stripe in 0..stripe_count {
        let straw = crush_hash32_2(group, stripe);
        if straw > best.1 {
            best = (stripe, straw);
        }
    }
    best.0
}

/// Bob Jenkins' 32-bit mix of three words (nine subtract-subtract-xor-shift steps).
fn jenkins_mix(mut a: u32, mut b: u32, mut c: u32) -> (u32, u32, u32) {
    a = a.wrapping_sub(b).wrapping_sub(c) ^ (c >> 13);
    b = b.wrapping_sub(c).wrapping_sub(a) ^ (a << 8);
    c = c.wrapping_sub(a).wrapping_sub(b) ^ (b >> 13);
    a = a.wrapping_sub(b).wrapping_sub(c) ^ (c >> 12);
    b = b.wrapping_sub(c).wrapping_sub(a) ^ (a << 16);
    c = c.wrapping_sub(a).wrapping_sub(b) ^ (b >> 5);
    a = a.wrapping_sub(b).wrapping_sub(c) ^ (c >> 3);
    b = b.wrapping_sub(c).wrapping_sub(a) ^ (a << 10);
    c = c.wrapping_sub(a).wrapping_sub(b) ^ (b >> 15);
    (a, b, c)
}

#[cfg(test)]
mod tests;
