//! Where and how the daemon logs: `tracing` to stderr, in one of two shapes.
//!
//! * **A person's terminal or a file** (the default): tracing's usual line, a timestamp, the
//!   level, the target, the message and its fields; colours only on a terminal.
//! * **The systemd journal**: when stderr *is* the journal's stream (systemd sets
//!   `JOURNAL_STREAM=<device>:<inode>` for a service whose output goes there, and the device
//!   and inode match stderr's), each line starts with sd-daemon's `<N>` syslog priority
//!   prefix (`<3>` error, `<4>` warning, `<6>` info, `<7>` debug and trace), which journald
//!   turns into the entry's priority, and has no timestamp (the journal stamps every entry)
//!   and no colours. `journalctl -u ulnetd -p warning` then filters by level, and
//!   `journalctl` shows the lines as a person reads them.
//!
//! The variable alone is not enough: a child of a journaled process inherits it while its
//! stderr may go elsewhere (sd-daemon(3), "JOURNAL_STREAM").
//!
//! The filter is `$ULNET_LOG` (`tracing_subscriber::EnvFilter` syntax), else the default the
//! caller gives.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::{Format, Full, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;

/// The environment variable holding the log filter.
pub const LOG_ENV: &str = "ULNET_LOG";

/// The variable systemd sets to the journal stream's `<device>:<inode>`.
pub const JOURNAL_STREAM_ENV: &str = "JOURNAL_STREAM";

/// Installs the global subscriber: stderr, filtered by `$ULNET_LOG` else `default`, in the
/// journal's shape when stderr is the journal.
pub fn init(default: &str) {
    let filter = EnvFilter::try_from_env(LOG_ENV).unwrap_or_else(|_| EnvFilter::new(default));
    if stderr_is_journal() {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .event_format(JournalFormat::default())
            .init();
    } else {
        use std::io::IsTerminal;
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .init();
    }
}

/// A subscriber that writes journal-shaped lines to `writer` (tests, and whoever embeds the
/// daemon and routes its log).
pub fn journal_subscriber<W>(writer: W, filter: EnvFilter) -> impl Subscriber + Send + Sync
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(false)
        .event_format(JournalFormat::default())
        .finish()
}

/// Whether stderr is the stream `$JOURNAL_STREAM` names.
pub fn stderr_is_journal() -> bool {
    let Ok(value) = std::env::var(JOURNAL_STREAM_ENV) else { return false };
    let Ok(stat) = rustix::fs::fstat(std::io::stderr()) else { return false };
    journal_stream_is(&value, stat.st_dev, stat.st_ino)
}

/// Whether `JOURNAL_STREAM`'s value (`<device>:<inode>`, both decimal) names the file with
/// this device and inode number.
pub fn journal_stream_is(value: &str, device: u64, inode: u64) -> bool {
    let Some((dev, ino)) = value.trim().split_once(':') else { return false };
    dev.parse::<u64>() == Ok(device) && ino.parse::<u64>() == Ok(inode)
}

/// sd-daemon's priority for a tracing level: `SD_ERR` 3, `SD_WARNING` 4, `SD_INFO` 6,
/// `SD_DEBUG` 7 (tracing has no notice, critical or alert).
pub fn syslog_priority(level: Level) -> u8 {
    match level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        Level::DEBUG | Level::TRACE => 7,
    }
}

/// `<N>target: message key=value`: the priority prefix, then tracing's full format without
/// the timestamp, the level (the prefix carries it) or colours.
#[derive(Debug)]
pub struct JournalFormat {
    inner: Format<Full, ()>,
}

impl Default for JournalFormat {
    fn default() -> Self {
        Self {
            inner: tracing_subscriber::fmt::format()
                .without_time()
                .with_level(false)
                .with_ansi(false),
        }
    }
}

impl<S, N> FormatEvent<S, N> for JournalFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        context: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        write!(writer, "<{}>", syslog_priority(*event.metadata().level()))?;
        self.inner.format_event(context, writer, event)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A writer into a shared buffer.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    fn logged(emit: impl FnOnce()) -> String {
        let buffer = Buffer::default();
        let subscriber = journal_subscriber(buffer.clone(), EnvFilter::new("trace"));
        tracing::subscriber::with_default(subscriber, emit);
        String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn journal_lines_carry_the_priority_and_no_timestamp_or_colour() {
        let text = logged(|| {
            tracing::error!(target: "ulnetd", "cannot bind");
            tracing::warn!(target: "ulnetd::live", nid = "10.0.0.1@tcp", "peer not added");
            tracing::info!(target: "ulnetd", "ready");
            tracing::debug!(target: "ulnet", "detail");
            tracing::trace!(target: "ulnet", "more");
        });
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "<3>ulnetd: cannot bind",
                "<4>ulnetd::live: peer not added nid=\"10.0.0.1@tcp\"",
                "<6>ulnetd: ready",
                "<7>ulnet: detail",
                "<7>ulnet: more",
            ]
        );
        assert!(!text.contains('\u{1b}'), "no ANSI escapes: {text:?}");
    }

    #[test]
    fn spans_stay_in_the_line() {
        let text = logged(|| {
            let span = tracing::info_span!(target: "ulnetd", "reload", generation = 2);
            let _entered = span.enter();
            tracing::info!(target: "ulnetd", "no change");
        });
        assert_eq!(text, "<6>reload{generation=2}: ulnetd: no change\n");
    }

    #[test]
    fn the_journal_stream_must_name_stderr() {
        assert!(journal_stream_is("8:12345", 8, 12345));
        assert!(journal_stream_is(" 8:12345\n", 8, 12345));
        assert!(!journal_stream_is("8:12346", 8, 12345));
        assert!(!journal_stream_is("9:12345", 8, 12345));
        for bad in ["", "8", "8:", ":12345", "x:y", "8:12345:1", "-8:12345"] {
            assert!(!journal_stream_is(bad, 8, 12345), "{bad:?}");
        }
    }

    #[test]
    fn levels_map_onto_sd_daemon_priorities() {
        assert_eq!(syslog_priority(Level::ERROR), 3);
        assert_eq!(syslog_priority(Level::WARN), 4);
        assert_eq!(syslog_priority(Level::INFO), 6);
        assert_eq!(syslog_priority(Level::DEBUG), 7);
        assert_eq!(syslog_priority(Level::TRACE), 7);
    }
}
