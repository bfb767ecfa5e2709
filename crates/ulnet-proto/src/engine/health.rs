//! Message health status and health values.
//!
//! lustre: include/linux/lnet/lib-types.h `enum lnet_msg_hstatus`, lnet/lnet/lib-msg.c
//! `lnet_health_check()`, include/linux/lnet/lib-lnet.h (`lnet_inc_healthv`, `lnet_dec_healthv`).

/// `LNET_MAX_HEALTH_VALUE`.
pub const MAX_HEALTH: u32 = 1000;

/// `enum lnet_msg_hstatus`: how a transmission or reception ended, set by the LND or by LNet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum HealthStatus {
    Ok = 0,
    LocalInterrupt = 1,
    LocalDropped = 2,
    LocalAborted = 3,
    LocalNoRoute = 4,
    LocalError = 5,
    LocalTimeout = 6,
    RemoteError = 7,
    RemoteDropped = 8,
    RemoteTimeout = 9,
    NetworkTimeout = 10,
}

/// What `lnet_health_check` does for a failed status (docs/protocol/semantics.md §4.2 table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HealthAction {
    pub(crate) local_failure: bool,
    pub(crate) remote_failure: bool,
    /// Resend allowed if the node has more than one real NI.
    pub(crate) local_resend: bool,
    /// Resend allowed if the peer has more than one NI.
    pub(crate) remote_resend: bool,
}

impl HealthStatus {
    pub const ALL: [HealthStatus; 11] = [
        Self::Ok,
        Self::LocalInterrupt,
        Self::LocalDropped,
        Self::LocalAborted,
        Self::LocalNoRoute,
        Self::LocalError,
        Self::LocalTimeout,
        Self::RemoteError,
        Self::RemoteDropped,
        Self::RemoteTimeout,
        Self::NetworkTimeout,
    ];

    pub fn is_ok(self) -> bool {
        self == Self::Ok
    }

    /// The failure table of `lnet_health_check()`.
    pub(crate) fn action(self) -> HealthAction {
        let none = HealthAction {
            local_failure: false,
            remote_failure: false,
            local_resend: false,
            remote_resend: false,
        };
        match self {
            Self::Ok => none,
            Self::LocalInterrupt
            | Self::LocalDropped
            | Self::LocalAborted
            | Self::LocalNoRoute
            | Self::LocalTimeout => {
                HealthAction { local_failure: true, local_resend: true, ..none }
            }
            Self::LocalError => HealthAction { local_failure: true, ..none },
            Self::RemoteDropped => {
                HealthAction { remote_failure: true, remote_resend: true, ..none }
            }
            Self::RemoteError | Self::RemoteTimeout => {
                HealthAction { remote_failure: true, ..none }
            }
            Self::NetworkTimeout => {
                HealthAction { local_failure: true, remote_failure: true, ..none }
            }
        }
    }

    /// Whether this failure maps to `-ETIMEDOUT` in the event (socklnd's mapping reversed).
    pub(crate) fn is_timeout(self) -> bool {
        matches!(self, Self::LocalTimeout | Self::RemoteTimeout | Self::NetworkTimeout)
    }
}

/// A health value in `0..=MAX_HEALTH`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Health(u32);

impl Health {
    pub const FULL: Self = Self(MAX_HEALTH);

    /// A health value, clamped to the maximum.
    pub fn new(value: u32) -> Self {
        Self(value.min(MAX_HEALTH))
    }

    pub fn value(self) -> u32 {
        self.0
    }

    /// `lnet_dec_healthv`: down by the sensitivity, flooring at 0.
    pub(crate) fn decrement(&mut self, sensitivity: u32) {
        self.0 = self.0.saturating_sub(sensitivity);
    }

    /// `lnet_inc_healthv`: up by the sensitivity (not 1), capped at the maximum.
    pub(crate) fn increment(&mut self, sensitivity: u32) {
        self.0 = self.0.saturating_add(sensitivity).min(MAX_HEALTH);
    }
}

impl Default for Health {
    fn default() -> Self {
        Self::FULL
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_lib_types_h() {
        for (number, status) in HealthStatus::ALL.iter().enumerate() {
            assert_eq!(*status as usize, number);
        }
    }

    #[test]
    fn table_matches_semantics_4_2() {
        assert!(HealthStatus::LocalDropped.action().local_resend);
        assert!(!HealthStatus::LocalError.action().local_resend);
        assert!(HealthStatus::RemoteDropped.action().remote_resend);
        assert!(!HealthStatus::RemoteTimeout.action().remote_resend);
        let network = HealthStatus::NetworkTimeout.action();
        assert!(
            network.local_failure
                && network.remote_failure
                && !network.local_resend
                && !network.remote_resend
        );
    }

    #[test]
    fn health_steps_by_sensitivity_and_clamps() {
        let mut health = Health::FULL;
        health.increment(100);
        assert_eq!(health.value(), 1000);
        for _ in 0..11 {
            health.decrement(100);
        }
        assert_eq!(health.value(), 0);
        health.increment(100);
        assert_eq!(health.value(), 100);
    }
}
