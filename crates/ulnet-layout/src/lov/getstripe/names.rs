//! Names lfs prints for patterns, component flags, FLR states and times.

use crate::lov::{
    LCM_FL_FLR_MASK, LCM_FL_PCC_RDONLY, LCM_FL_RDONLY, LCM_FL_SYNC_PENDING, LCM_FL_WRITE_PENDING,
    LCME_FL_COMPRESS, LCME_FL_EXTENSION, LCME_FL_INIT, LCME_FL_NOCOMPR, LCME_FL_NOSYNC,
    LCME_FL_OFFLINE, LCME_FL_PARITY, LCME_FL_PARTIAL, LCME_FL_PREF_RD, LCME_FL_PREF_RW,
    LCME_FL_PREF_WR, LCME_FL_STALE, LOV_PATTERN_COMPRESS, LOV_PATTERN_DEFAULT, LOV_PATTERN_F_HOLE,
    LOV_PATTERN_F_RELEASED, LOV_PATTERN_FOREIGN, LOV_PATTERN_MDT, LOV_PATTERN_OVERSTRIPING,
    LOV_PATTERN_RAID0, LOV_PATTERN_RAID1,
};

/// Component flag names in the order lfs tests them.
// lustre: lustre/include/lustre/lustreapi.h comp_flags_table[]
pub(super) const COMP_FLAG_NAMES: [(u32, &str); 12] = [
    (LCME_FL_INIT, "init"),
    (LCME_FL_STALE, "stale"),
    (LCME_FL_PREF_RW, "prefer"),
    (LCME_FL_PREF_RD, "prefrd"),
    (LCME_FL_PREF_WR, "prefwr"),
    (LCME_FL_OFFLINE, "offline"),
    (LCME_FL_NOSYNC, "nosync"),
    (LCME_FL_EXTENSION, "extension"),
    (LCME_FL_PARITY, "parity"),
    (LCME_FL_COMPRESS, "compress"),
    (LCME_FL_PARTIAL, "partial"),
    (LCME_FL_NOCOMPR, "nocompr"),
];

/// Pattern names in the order lfs tests them.
// lustre: lustre/utils/liblustreapi_layout.c lov_pattern_names[]
const PATTERN_NAMES: [(u32, &str); 10] = [
    (LOV_PATTERN_RAID0, "raid0"),
    (LOV_PATTERN_RAID1, "raid1"),
    (LOV_PATTERN_MDT, "mdt"),
    (LOV_PATTERN_OVERSTRIPING, "overstriped"),
    (
        LOV_PATTERN_RAID1
            | LOV_PATTERN_MDT
            | LOV_PATTERN_OVERSTRIPING
            | LOV_PATTERN_FOREIGN
            | LOV_PATTERN_COMPRESS,
        "bad",
    ),
    (LOV_PATTERN_FOREIGN, "foreign"),
    (LOV_PATTERN_COMPRESS, "compress"),
    (LOV_PATTERN_F_HOLE, "hole"),
    (LOV_PATTERN_F_RELEASED, "released"),
    (LOV_PATTERN_DEFAULT, "default"),
];

/// `raid0`, `raid0,overstriped`, `mdt`, …; unknown bits as `unknown_<hex>`.
pub fn pattern_string(pattern: u32) -> String {
    let mut names: Vec<String> = Vec::new();
    let mut rest = pattern;
    for (bits, name) in PATTERN_NAMES {
        if rest == 0 {
            break;
        }
        if rest & bits == bits {
            names.push(name.to_string());
            rest &= !bits;
        }
    }
    if rest != 0 {
        names.push(format!("unknown_{rest:x}"));
    }
    names.join(",")
}

/// `init,stale,…`; `0` for none; unknown bits appended in hex.
pub fn flags_string(flags: u32) -> String {
    if flags == 0 {
        return "0".into();
    }
    let mut names: Vec<String> = Vec::new();
    let mut rest = flags;
    for (bits, name) in COMP_FLAG_NAMES {
        if rest & bits == bits {
            names.push(name.into());
            rest &= !bits;
        }
    }
    if rest != 0 {
        names.push(format!("{rest:#x}"));
    }
    names.join(",")
}

/// The FLR state of `lcm_flags`: `ro`, `wp`, `sp` (with `,pccro`), else `0`.
pub fn layout_flags_string(flags: u16) -> &'static str {
    match flags & LCM_FL_FLR_MASK {
        LCM_FL_RDONLY => "ro",
        LCM_FL_WRITE_PENDING => "wp",
        LCM_FL_SYNC_PENDING => "sp",
        f if f == LCM_FL_RDONLY | LCM_FL_PCC_RDONLY => "ro,pccro",
        f if f == LCM_FL_WRITE_PENDING | LCM_FL_PCC_RDONLY => "wp,pccro",
        f if f == LCM_FL_SYNC_PENDING | LCM_FL_PCC_RDONLY => "sp,pccro",
        _ => "0",
    }
}

/// `Thu Jan  1 00:00:00 1970`: C's `%c` in the C locale, in UTC (lfs uses local time).
pub fn ctime_utc(seconds: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let days = seconds / 86_400;
    let rem = seconds % 86_400;
    let weekday = DAYS.get((days % 7) as usize).copied().unwrap_or("???");
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    // At most u64::MAX / 86400 days, which fits i64.
    let z = i64::try_from(days).unwrap_or(i64::MAX - 719_468) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let month_name = MONTHS.get((month - 1) as usize).copied().unwrap_or("???");
    format!(
        "{weekday} {month_name} {day:>2} {:02}:{:02}:{:02} {year}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
