//! setstripe errors: lfs's texts and exit statuses.

use thiserror::Error;

/// A setstripe error; `Display` is lfs's text.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SetstripeError {
    #[error("lfs setstripe: invalid stripe count '{0}'")]
    StripeCount(String),
    #[error("lfs setstripe: invalid stripe size '{0}'")]
    StripeSize(String),
    #[error("lfs setstripe: invalid stripe offset '{0}'")]
    StripeOffset(String),
    #[error("lfs setstripe: invalid component end '{0}'")]
    ComponentEnd(String),
    #[error("lfs setstripe: invalid OST target(s) '{0}'")]
    OstList(String),
    #[error("lfs setstripe: invalid extension size '{0}'")]
    ExtensionSize(String),
    #[error("lfs setstripe: invalid component flags '{0}'")]
    ComponentFlags(String),
    #[error("lfs setstripe: -C|--overstripe-count incompatible with DoM layout")]
    OverstripeWithDom,
    #[error("lfs setstripe: -o|--ost incompatible with DoM layout")]
    OstWithDom,
    #[error("error: 'mdt' layout can be only the first one")]
    DomNotFirst,
    #[error("error: 'mdt' layout size is too big")]
    DomTooBig,
    #[error("error: layout '{0}' is unknown, supported layouts are: 'mdt', 'raid0'")]
    UnknownLayout(String),
    #[error("Option 'stripe-count' can't be specified with Data-on-MDT component: {0}")]
    DomStripeCount(i64),
    #[error("Option 'stripe-size' can't be specified with Data-on-MDT component: {0}")]
    DomStripeSize(u64),
    #[error("Option 'ost-list' can't be specified with Data-on-MDT component: '{0}'")]
    DomOstList(usize),
    #[error("Option 'stripe-offset' can't be specified with Data-on-MDT component: {0}")]
    DomStripeOffset(i64),
    #[error("Option 'pool' can't be specified with Data-on-MDT component: '{0}'")]
    DomPool(String),
    #[error("stripe_count({0}) != nr_tgts({1})")]
    CountNotListLength(i64, usize),
    #[error("stripe_count({0}) != nr_tgts({1})")]
    PlainCountNotListLength(i64, usize),
    #[error("lfs setstripe: error: stripe size '{0}' over 4GB limit: Invalid argument (22)")]
    PlainStripeSizeTooBig(u64),
    #[error(
        "lfs setstripe: Invalid pattern: '-L mdt', must be specified with -E: Invalid argument (22)"
    )]
    PlainDom,
    #[error("lfs setstripe: Invalid Poolname '{0}': Invalid argument (22)")]
    PlainPoolName(String),
    #[error("Invalid stripe offset '{0}', not in the target list")]
    OffsetNotInList(i64),
    #[error("Set stripe size {0} failed: Invalid argument")]
    SetStripeSize(u64),
    #[error("Set pool name: {0} failed. Invalid argument")]
    PoolName(String),
    /// `llapi_layout_sanity()` refused the layout; the text is `llapi_layout_strerror`'s.
    #[error("Invalid layout: {0}")]
    Sanity(&'static str),
    #[error("lfs: unrecognized option '{0}'")]
    UnknownOption(String),
    #[error("lfs: option requires an argument -- '{0}'")]
    MissingArgument(String),
    #[error("lfs setstripe: {0} is not supported by this tool")]
    Unsupported(String),
}

impl SetstripeError {
    /// The exit status lfs ends with: 4 (`CMD_HELP`) for option errors, which print the
    /// usage, else the errno of the failure (`EINVAL` 22, `EFBIG` 27).
    // lustre: libcfs/include/libcfs/util/parser.h CMD_HELP; lustre/utils/lfs.c main()
    pub fn exit_status(&self) -> u8 {
        match self {
            Self::DomTooBig => 27,
            Self::PlainStripeSizeTooBig(_)
            | Self::PlainDom
            | Self::PlainPoolName(_)
            | Self::DomNotFirst
            | Self::UnknownLayout(_) => 22,
            // Every failure while building a component is EINVAL.
            _ if self.reports_invalid_layout() => 22,
            _ => 4,
        }
    }
}

impl SetstripeError {
    /// Whether lfs follows this message with `error: lfs: invalid layout` (failures while
    /// building a component).
    pub fn reports_invalid_layout(&self) -> bool {
        matches!(
            self,
            Self::DomStripeCount(_)
                | Self::DomStripeSize(_)
                | Self::DomOstList(_)
                | Self::DomStripeOffset(_)
                | Self::DomPool(_)
                | Self::CountNotListLength(..)
                | Self::OffsetNotInList(_)
                | Self::SetStripeSize(_)
                | Self::PoolName(_)
                | Self::Sanity(_)
        )
    }
}
