//! The commands that act on the host rather than on the node: `setup-sysctl`,
//! `setup-mrrouting` and `service-id`.
//!
//! `setup-sysctl` does what lnetctl's helper script does (lnetctl runs
//! `/usr/sbin/lnet-sysctl-config`, which reads lnet's `enable_sysctl_setup`): with the node's
//! `enable_sysctl_setup` at 1, it saves the current value of every key of
//! `/etc/lnet-sysctl.conf` to `/etc/lnet-sysctl.bak` and applies the file (`sysctl -p`); at 0
//! it applies the backup, if there is one, and removes it. The writing is this process's, as
//! it is lnetctl's: run it as root. The neighbour table sizes the shipped file sets are
//! host-wide (Linux shows them in the initial network namespace only).
//!
//! `setup-mrrouting` runs the script lnetctl runs, Lustre's `ksocklnd-config` (from
//! `$KSOCKLND_CONFIG` when that path ends in `/ksocklnd-config`, else
//! `/usr/sbin/ksocklnd-config`), which reads the tcp interfaces from `$LNETCTL net show` and
//! writes a routing table and rule per interface: ulnetctl names itself as `LNETCTL` (and
//! passes its `--socket` on as `ULNET_SOCKET`), so the script configures the node's
//! interfaces. `net add` does not run it (lnetctl does, unless `--skip-mr-route-setup`).
//!
//! lustre: lnet/utils/lnetconfig/liblnetconfig.c `lustre_lnet_setup_sysctl()`,
//! `lustre_lnet_setup_mrrouting()`,
//! `lustre_lnet_calc_service_id()`; lustre/scripts/lnet-sysctl-config;
//! lustre/conf/lnet-sysctl.conf.

use std::io::Read;
use std::path::{Path, PathBuf};

use ulnet_config::render::strerror;
use ulnet_control::message::errno;
use ulnet_control::{Request, Response};

use crate::{Ctx, Failure, report};

/// lnetctl's `MANAGE_CMD`: the head of `setup-sysctl`'s error report.
const MANAGE_CMD: &str = "manage";

/// Where ko2iblnd's module parameters are (lnetconfig's `o2iblnd_modparam_path`).
const O2IBLND_PARAMETERS: &str = "/sys/module/ko2iblnd/parameters";

/// `RDMA_PS_TCP` (rdma/rdma_cma.h): the port space of the IB service id.
const RDMA_PS_TCP: u64 = 0x0106;

/// -ENOMSG: lnetconfig's `LUSTRE_CFG_RC_NO_MATCH`, `read_sysfs_file()`'s failure.
const RC_NO_MATCH: i32 = -42;

/// Most bytes read from a sysctl file or backup (the shipped file is under 2 KiB).
pub(crate) const MAX_SYSCTL_FILE_LEN: u64 = 64 * 1024;

/// Most bytes of one sysctl value read back for the backup.
const MAX_SYSCTL_VALUE_LEN: u64 = 4096;

/// `service-id`: the IB service id the kernel's ko2iblnd derives from its `service` port,
/// read where lnetctl reads it (ulnet drives no o2ib network; on a host whose kernel runs
/// ko2iblnd this is that module's id).
pub(crate) fn service_id(ctx: &mut Ctx<'_, '_>, _argv: Vec<String>) -> i32 {
    let path = Path::new(O2IBLND_PARAMETERS).join("service");
    match read_service_port(&path) {
        Ok(port) => {
            ctx.out(&format!("service_id:\n    value: 0x{:x}\n", service_id_of(port)));
            0
        }
        Err(code) => {
            let text = format!(
                "error:\n    msg: \"cannot get service port: {} ({})\"\n",
                strerror(code),
                -code
            );
            ctx.err(&text);
            RC_NO_MATCH
        }
    }
}

/// The port in ko2iblnd's `service` parameter file (`atoi()`: leading digits, else 0), or
/// the errno of the failure to read it.
fn read_service_port(path: &Path) -> Result<u32, i32> {
    let mut text = String::new();
    let file = std::fs::File::open(path).map_err(|error| os_errno(&error))?;
    file.take(64).read_to_string(&mut text).map_err(|error| os_errno(&error))?;
    let digits: String = text.trim_start().chars().take_while(char::is_ascii_digit).collect();
    Ok(digits.parse().unwrap_or(0))
}

/// `htobe64((RDMA_PS_TCP << 16) + port)`, read back as a host integer as lnetctl prints it.
pub(crate) fn service_id_of(port: u32) -> u64 {
    ((RDMA_PS_TCP << 16) + u64::from(port)).to_be()
}

/// The files `setup-sysctl` reads and writes.
#[derive(Clone, Debug)]
pub(crate) struct SysctlPaths {
    /// The settings to apply.
    pub conf: PathBuf,
    /// The values they replaced.
    pub backup: PathBuf,
    /// Where sysctl keys are files (`net.ipv4.x` is `<proc_sys>/net/ipv4/x`).
    pub proc_sys: PathBuf,
}

impl Default for SysctlPaths {
    fn default() -> Self {
        Self {
            conf: PathBuf::from("/etc/lnet-sysctl.conf"),
            backup: PathBuf::from("/etc/lnet-sysctl.bak"),
            proc_sys: PathBuf::from("/proc/sys"),
        }
    }
}

/// The script `setup-mrrouting` runs: `$KSOCKLND_CONFIG` if it names a `ksocklnd-config`.
fn ksocklnd_config() -> PathBuf {
    std::env::var_os("KSOCKLND_CONFIG")
        .map(PathBuf::from)
        .filter(|path| path.to_string_lossy().ends_with("/ksocklnd-config"))
        .unwrap_or_else(|| PathBuf::from("/usr/sbin/ksocklnd-config"))
}

/// `setup-mrrouting`: runs `ksocklnd-config` against this node; what it prints goes straight
/// to this process's standard streams.
pub(crate) fn setup_mrrouting(ctx: &mut Ctx<'_, '_>, _argv: Vec<String>) -> i32 {
    let script = ksocklnd_config();
    let mut command = std::process::Command::new(&script);
    if let Some(myself) = own_path(&ctx.program_path) {
        command.env("LNETCTL", myself);
    }
    if let Some(socket) = &ctx.socket {
        command.env(ulnet_control::path::SOCKET_ENV, socket);
    }
    // The script writes to this process's streams, as under lnetctl's `system()`.
    let rc = match command.status() {
        Ok(status) => {
            if status.success() {
                return 0;
            }
            let descr = match status.code() {
                Some(code) => format!("exit status {code}"),
                None => "killed by a signal".to_string(),
            };
            (-errno::EIO, descr)
        }
        Err(error) => {
            let code = os_errno(&error);
            (-code, strerror(code))
        }
    };
    let descr = format!("failed to execute ksocklnd-config : {}", rc.1);
    report::cyaml_quoted(ctx, MANAGE_CMD, "setup-mrrouting", rc.0, &descr);
    rc.0
}

/// This program's path as invoked: `argv[0]` made absolute, or found on `$PATH`. Not the
/// binary's own path: the binary may serve other names (`ulnetd` is also `ulnetctl`).
fn own_path(argv0: &str) -> Option<PathBuf> {
    if argv0.contains('/') {
        return std::path::absolute(argv0).ok();
    }
    let search = std::env::var_os("PATH")?;
    std::env::split_paths(&search).map(|dir| dir.join(argv0)).find(|path| path.is_file())
}

/// `setup-sysctl`: nothing printed on success; a failure is lnetctl's report, with the errno
/// of what failed.
pub(crate) fn setup_sysctl(ctx: &mut Ctx<'_, '_>, _argv: Vec<String>) -> i32 {
    let enabled = match ctx.call(&Request::SysctlSetup) {
        Ok(Response::SysctlSetup { enabled }) => enabled,
        Ok(_) => return report::unexpected(ctx, "not the sysctl switch"),
        Err(Failure::Reported(rc)) => return rc,
        Err(Failure::Daemon(error)) => {
            report_sysctl(ctx, error.errno());
            return error.errno();
        }
    };
    match apply_sysctl_setup(&SysctlPaths::default(), enabled) {
        Ok(()) => 0,
        Err(code) => {
            report_sysctl(ctx, -code);
            -code
        }
    }
}

fn report_sysctl(ctx: &mut Ctx<'_, '_>, rc: i32) {
    let descr = format!("failed to execute lnet-sysctl-config : {}", strerror(-rc));
    report::cyaml_quoted(ctx, MANAGE_CMD, "setup-sysctl", rc, &descr);
}

/// What the setup script does: `enabled`, back up and apply `paths.conf`; not, apply and
/// remove the backup if there is one. Errors are positive errnos.
pub(crate) fn apply_sysctl_setup(paths: &SysctlPaths, enabled: bool) -> Result<(), i32> {
    if !enabled {
        if !paths.backup.is_file() {
            return Ok(());
        }
        // The script ignores the outcome of restoring: the backup goes either way.
        let restored = read_bounded(&paths.backup).and_then(|text| apply(paths, &text));
        let removed = std::fs::remove_file(&paths.backup).map_err(|error| os_errno(&error));
        return restored.and(removed);
    }
    let text = read_bounded(&paths.conf)?;
    let mut backup = String::from("# Generated backup for original lnet-sysctl.conf parameters\n");
    for (key, _) in text.lines().filter_map(backup_entry) {
        // `sysctl -n` of a key that cannot be read prints nothing.
        let value = sysctl_file(paths, key).and_then(|path| read_value(&path)).unwrap_or_default();
        backup.push_str(&format!("{key}={value}\n"));
    }
    std::fs::write(&paths.backup, backup).map_err(|error| os_errno(&error))?;
    apply(paths, &text)
}

/// A line the script backs up: `key = value`, both of letters, digits, `_`, `.` and `-`.
fn backup_entry(line: &str) -> Option<(&str, &str)> {
    let (key, value) = line.split_once('=')?;
    let (key, value) = (key.trim(), value.trim());
    let word = |text: &str| {
        !text.is_empty()
            && text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    };
    (word(key) && word(value)).then_some((key, value))
}

/// `sysctl -p`: every `key = value` line written, comments (`#`, `;`) and blank lines
/// skipped; a key starting with `-` may fail. Goes on past a failure and returns the first.
fn apply(paths: &SysctlPaths, text: &str) -> Result<(), i32> {
    let mut first_error = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let outcome = match line.split_once('=') {
            None => Err(errno::EINVAL),
            Some((key, value)) => {
                let (key, value) = (key.trim(), value.trim());
                let (key, optional) = match key.strip_prefix('-') {
                    Some(key) => (key, true),
                    None => (key, false),
                };
                let written = sysctl_file(paths, key).and_then(|path| write_value(&path, value));
                if optional { Ok(()) } else { written }
            }
        };
        if let Err(code) = outcome {
            first_error.get_or_insert(code);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// The file of sysctl `key` (`.` or `/` separated); a key that would leave `proc_sys` is
/// `EINVAL`.
fn sysctl_file(paths: &SysctlPaths, key: &str) -> Result<PathBuf, i32> {
    let mut path = paths.proc_sys.clone();
    for part in key.split(['.', '/']) {
        if part.is_empty() || part == ".." {
            return Err(errno::EINVAL);
        }
        path.push(part);
    }
    Ok(path)
}

/// Writes an existing sysctl file (never creates one: a key sysctl does not know is
/// `ENOENT`).
fn write_value(path: &Path, value: &str) -> Result<(), i32> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(|error| os_errno(&error))?;
    file.write_all(format!("{value}\n").as_bytes()).map_err(|error| os_errno(&error))
}

fn read_value(path: &Path) -> Result<String, i32> {
    let file = std::fs::File::open(path).map_err(|error| os_errno(&error))?;
    let mut text = String::new();
    file.take(MAX_SYSCTL_VALUE_LEN).read_to_string(&mut text).map_err(|error| os_errno(&error))?;
    Ok(text.trim().to_string())
}

/// A settings file, refused past [`MAX_SYSCTL_FILE_LEN`] (`EFBIG`).
fn read_bounded(path: &Path) -> Result<String, i32> {
    const EFBIG: i32 = 27;
    let file = std::fs::File::open(path).map_err(|error| os_errno(&error))?;
    let mut text = String::new();
    file.take(MAX_SYSCTL_FILE_LEN + 1)
        .read_to_string(&mut text)
        .map_err(|error| os_errno(&error))?;
    if text.len() as u64 > MAX_SYSCTL_FILE_LEN {
        return Err(EFBIG);
    }
    Ok(text)
}

fn os_errno(error: &std::io::Error) -> i32 {
    error.raw_os_error().unwrap_or(errno::EIO)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory standing for `/etc` and `/proc/sys`.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("ulnetctl-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.join("proc/net/ipv4/neigh/default")).unwrap();
            Self(dir)
        }

        fn paths(&self) -> SysctlPaths {
            SysctlPaths {
                conf: self.0.join("lnet-sysctl.conf"),
                backup: self.0.join("lnet-sysctl.bak"),
                proc_sys: self.0.join("proc"),
            }
        }

        fn key(&self, name: &str) -> PathBuf {
            self.0.join("proc/net/ipv4/neigh/default").join(name)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn the_service_id_is_the_port_space_and_port_big_endian() {
        // ko2iblnd's default service port, 987: 0x010603db in network order.
        assert_eq!(service_id_of(987), 0x0106_03db_u64.to_be());
        if cfg!(target_endian = "little") {
            assert_eq!(service_id_of(987), 0xdb03_0601_0000_0000);
        }
    }

    #[test]
    fn the_service_port_is_read_as_atoi_does() {
        let scratch = Scratch::new("service");
        let path = scratch.0.join("service");
        std::fs::write(&path, "987\n").unwrap();
        assert_eq!(read_service_port(&path), Ok(987));
        std::fs::write(&path, "x").unwrap();
        assert_eq!(read_service_port(&path), Ok(0));
        assert_eq!(read_service_port(&scratch.0.join("absent")), Err(2));
    }

    #[test]
    fn enabled_backs_up_then_applies_and_disabled_restores() {
        let scratch = Scratch::new("sysctl");
        let paths = scratch.paths();
        std::fs::write(scratch.key("gc_thresh1"), "128\n").unwrap();
        std::fs::write(scratch.key("gc_thresh3"), "1024\n").unwrap();
        std::fs::write(
            &paths.conf,
            "# comment\n\nnet.ipv4.neigh.default.gc_thresh1 = 1024\n\
             net.ipv4.neigh.default.gc_thresh3=4096\n",
        )
        .unwrap();
        assert_eq!(apply_sysctl_setup(&paths, true), Ok(()));
        assert_eq!(std::fs::read_to_string(scratch.key("gc_thresh1")).unwrap(), "1024\n");
        assert_eq!(std::fs::read_to_string(scratch.key("gc_thresh3")).unwrap(), "4096\n");
        assert_eq!(
            std::fs::read_to_string(&paths.backup).unwrap(),
            "# Generated backup for original lnet-sysctl.conf parameters\n\
             net.ipv4.neigh.default.gc_thresh1=128\nnet.ipv4.neigh.default.gc_thresh3=1024\n"
        );
        assert_eq!(apply_sysctl_setup(&paths, false), Ok(()));
        assert_eq!(std::fs::read_to_string(scratch.key("gc_thresh1")).unwrap(), "128\n");
        assert_eq!(std::fs::read_to_string(scratch.key("gc_thresh3")).unwrap(), "1024\n");
        assert!(!paths.backup.exists());
        // Disabled without a backup: nothing to do.
        assert_eq!(apply_sysctl_setup(&paths, false), Ok(()));
    }

    #[test]
    fn failures_carry_their_errno() {
        let scratch = Scratch::new("sysctl-errors");
        let paths = scratch.paths();
        // No settings file.
        assert_eq!(apply_sysctl_setup(&paths, true), Err(2));
        // A key with no file, a line without '=', a key leaving the tree: the first error.
        std::fs::write(&paths.conf, "net.ipv4.absent = 1\n").unwrap();
        assert_eq!(apply_sysctl_setup(&paths, true), Err(2));
        std::fs::write(&paths.conf, "just words\n").unwrap();
        assert_eq!(apply_sysctl_setup(&paths, true), Err(errno::EINVAL));
        std::fs::write(&paths.conf, "net..x = 1\n").unwrap();
        assert_eq!(apply_sysctl_setup(&paths, true), Err(errno::EINVAL));
        // A key marked '-' may fail.
        std::fs::write(&paths.conf, "-net.ipv4.absent = 1\n").unwrap();
        assert_eq!(apply_sysctl_setup(&paths, true), Ok(()));
        // Oversized.
        std::fs::write(&paths.conf, "#".repeat(MAX_SYSCTL_FILE_LEN as usize + 1)).unwrap();
        assert_eq!(apply_sysctl_setup(&paths, true), Err(27));
    }

    #[test]
    fn backup_entries_follow_the_scripts_pattern() {
        assert_eq!(backup_entry(" a.b-c_d = 10 "), Some(("a.b-c_d", "10")));
        assert_eq!(backup_entry("a = 1 2"), None);
        assert_eq!(backup_entry("# a = 1"), None);
        assert_eq!(backup_entry("a ="), None);
    }
}
