//! Where the control socket is: `--socket PATH`, else `$ULNET_SOCKET`, else
//! `/run/ulnet/ulnetd.sock` for root and `$XDG_RUNTIME_DIR/ulnet/ulnetd.sock` for other users
//! (falling back to `<temp dir>/ulnet-<uid>/ulnetd.sock` without `XDG_RUNTIME_DIR`).
//! Daemon and CLI resolve it the same way, so both find each other with no options.

use std::ffi::OsString;
use std::path::PathBuf;

/// The environment variable naming the socket.
pub const SOCKET_ENV: &str = "ULNET_SOCKET";

/// The system daemon's socket.
pub const ROOT_SOCKET_PATH: &str = "/run/ulnet/ulnetd.sock";

/// The socket's directory and file under a per-user base directory.
pub const USER_SOCKET_DIR: &str = "ulnet";
pub const SOCKET_FILE: &str = "ulnetd.sock";

/// Which rule chose the path (for messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathSource {
    /// `--socket`.
    Option,
    /// `$ULNET_SOCKET`.
    Environment,
    /// The root or per-user default.
    Default,
}

/// The socket path for this process: `option` if given, else from the environment.
pub fn socket_path(option: Option<PathBuf>) -> (PathBuf, PathSource) {
    socket_path_from(
        option,
        std::env::var_os(SOCKET_ENV),
        effective_uid(),
        std::env::var_os("XDG_RUNTIME_DIR"),
    )
}

/// The resolution rule with its inputs explicit. Empty variables count as unset; an unknown
/// uid counts as not root.
pub fn socket_path_from(
    option: Option<PathBuf>,
    env_socket: Option<OsString>,
    euid: Option<u32>,
    xdg_runtime_dir: Option<OsString>,
) -> (PathBuf, PathSource) {
    if let Some(path) = option {
        return (path, PathSource::Option);
    }
    if let Some(path) = env_socket.filter(|value| !value.is_empty()) {
        return (PathBuf::from(path), PathSource::Environment);
    }
    if euid == Some(0) {
        return (PathBuf::from(ROOT_SOCKET_PATH), PathSource::Default);
    }
    let base = match xdg_runtime_dir.filter(|value| !value.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let uid = euid.map_or_else(|| "unknown".to_string(), |uid| uid.to_string());
            std::env::temp_dir().join(format!("ulnet-{uid}"))
        }
    };
    (base.join(USER_SOCKET_DIR).join(SOCKET_FILE), PathSource::Default)
}

/// This process's effective uid, from `/proc/self/status` (`Uid: real effective saved fs`).
pub fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_effective_uid(&status)
}

fn parse_effective_uid(status: &str) -> Option<u32> {
    let line = status.lines().find_map(|line| line.strip_prefix("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_wins() {
        let (path, source) =
            socket_path_from(Some("/tmp/a.sock".into()), Some("/tmp/b.sock".into()), Some(0), None);
        assert_eq!((path, source), (PathBuf::from("/tmp/a.sock"), PathSource::Option));
    }

    #[test]
    fn then_the_environment() {
        let (path, source) = socket_path_from(None, Some("/tmp/b.sock".into()), Some(0), None);
        assert_eq!((path, source), (PathBuf::from("/tmp/b.sock"), PathSource::Environment));
    }

    #[test]
    fn an_empty_environment_variable_is_unset() {
        let (path, _) = socket_path_from(None, Some("".into()), Some(0), None);
        assert_eq!(path, PathBuf::from(ROOT_SOCKET_PATH));
    }

    #[test]
    fn root_uses_run() {
        let (path, source) = socket_path_from(None, None, Some(0), Some("/run/user/0".into()));
        assert_eq!((path, source), (PathBuf::from(ROOT_SOCKET_PATH), PathSource::Default));
    }

    #[test]
    fn users_use_their_runtime_directory() {
        let (path, _) = socket_path_from(None, None, Some(1000), Some("/run/user/1000".into()));
        assert_eq!(path, PathBuf::from("/run/user/1000/ulnet/ulnetd.sock"));
    }

    #[test]
    fn users_without_a_runtime_directory_use_the_temp_directory() {
        let (path, _) = socket_path_from(None, None, Some(1000), None);
        assert_eq!(path, std::env::temp_dir().join("ulnet-1000/ulnet/ulnetd.sock"));
    }

    #[test]
    fn the_effective_uid_is_the_second_field() {
        let status = "Name:\tx\nUid:\t1000\t0\t0\t0\nGid:\t5\t5\t5\t5\n";
        assert_eq!(parse_effective_uid(status), Some(0));
        assert_eq!(parse_effective_uid("Name:\tx\n"), None);
        assert!(effective_uid().is_some());
    }
}
