//! Running `ulnetd` and `ulnetctl` as processes, and daemons in this process.
//!
//! `ulnetctl` is the `ulnetd` binary run under the name `ulnetctl` (a symlink in the test
//! target directory): cargo gives tests the path of their own package's binaries only, and
//! the binary under that name runs exactly the code of the `ulnetctl` binary
//! (`ulnetctl::run` on the process's streams), always built from the sources under test.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{OnceLock, mpsc};
use std::time::{Duration, Instant};

use crate::HANG_GUARD;

pub const ULNETD: &str = env!("CARGO_BIN_EXE_ulnetd");

#[path = "../../../ulnetctl/tests/support/process.rs"]
mod process;
pub use process::{Run, TempDir};

impl TempDir {
    /// A fresh directory for the test part `tag`.
    pub fn new(tag: &str) -> Self {
        TempDir::named("uld", tag)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Writes `text` to `name` and returns its path.
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

/// The `ulnetctl` link to the `ulnetd` binary.
pub fn ulnetctl_path() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ulnetctl-link");
        std::fs::create_dir_all(&dir).unwrap();
        let link = dir.join("ulnetctl");
        // Replace atomically: another test process may be using the old link.
        let fresh = dir.join(format!("ulnetctl.{}", std::process::id()));
        let _ = std::fs::remove_file(&fresh);
        std::os::unix::fs::symlink(ULNETD, &fresh).unwrap();
        std::fs::rename(&fresh, &link).unwrap();
        link
    })
}

impl Run {
    /// What a snapshot records: the command, exit status, stdout and stderr.
    pub fn transcript(&self) -> String {
        self.transcript_of(&mask_latency(&self.stdout))
    }
}

/// Replaces measured latencies (`<op>_min_nsec: 260460`, `put_ack_p50_usec: 12`) with
/// `<measured>`: they differ from run to run; zeros and sample counts stay.
pub fn mask_latency(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let measured = line.split_once(": ").filter(|(key, value)| {
            (key.ends_with("_nsec") || key.ends_with("_usec")) && value.trim() != "0"
        });
        match measured {
            Some((key, _)) => {
                out.push_str(key);
                out.push_str(": <measured>\n");
            }
            None => out.push_str(line),
        }
    }
    out
}

/// Runs `ulnetctl ARGS` with `$ULNET_SOCKET` set to `socket`.
pub fn ulnetctl(socket: &Path, args: &[&str]) -> Run {
    ulnetctl_with_stdin(socket, args, "")
}

pub fn ulnetctl_with_stdin(socket: &Path, args: &[&str], stdin: &str) -> Run {
    process::run_program(ulnetctl_path(), args, Some(socket), stdin)
}

/// A `ulnetd` process.
pub struct Process {
    pub child: Child,
    pub dir: TempDir,
    pub socket: PathBuf,
    /// The ready line, once seen.
    pub ready: Option<String>,
    /// From spawning to the ready line.
    pub startup: Duration,
    lines: mpsc::Receiver<String>,
}

impl Process {
    /// Spawns `ulnetd --socket <dir>/ulnetd.sock ARGS` with `config` as its `--config`
    /// (none when `None`), and waits for the ready line or the exit.
    pub fn spawn(config: Option<&str>, extra: &[&str]) -> Self {
        let dir = TempDir::new("d");
        let socket = dir.path("ulnetd.sock");
        let mut command = Command::new(ULNETD);
        if let Some(text) = config {
            command.arg("--config").arg(dir.file("ulnetd.yaml", text));
        }
        command.arg("--socket").arg(&socket).args(extra);
        Self::spawn_command(command, dir, socket)
    }

    pub fn spawn_command(mut command: Command, dir: TempDir, socket: PathBuf) -> Self {
        let log = std::fs::File::create(dir.path("stderr.log")).unwrap();
        let started = Instant::now();
        let mut child = command
            .env_remove("ULNET_SOCKET")
            .env("ULNET_LOG", std::env::var("ULNET_TEST_LOG").unwrap_or_else(|_| "info".into()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let mut process = Self { child, dir, socket, ready: None, startup: Duration::ZERO, lines };
        // The first line is the ready line; none (EOF) means the daemon exited.
        if let Ok(line) = process.lines.recv_timeout(HANG_GUARD) {
            process.startup = started.elapsed();
            process.ready = Some(line);
        }
        process
    }

    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap()
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        let mut text = String::new();
        std::fs::File::open(self.dir.path("stderr.log"))
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        text
    }

    pub fn ulnetctl(&self, args: &[&str]) -> Run {
        ulnetctl(&self.socket, args)
    }

    /// Sends `signal` (by number) and waits for the exit status.
    pub fn signal_and_wait(&mut self, signal: i32) -> i32 {
        self.signal(signal);
        self.wait()
    }

    /// Sends `signal` (by number).
    pub fn signal(&self, signal: i32) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits (bounded) for the exit status.
    pub fn wait(&mut self) -> i32 {
        let deadline = Instant::now() + HANG_GUARD;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            assert!(Instant::now() < deadline, "ulnetd did not exit");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Resident set size now, from /proc.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = status.lines().find(|line| line.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub const SIGHUP: i32 = 1;
pub const SIGINT: i32 = 2;
pub const SIGTERM: i32 = 15;
/// Used by the netns tests (a router killed under load).
#[allow(dead_code)]
pub const SIGKILL: i32 = 9;

/// Replaces every occurrence of `path` with `<dir>` (snapshots must not hold temp names).
pub fn mask(text: &str, dir: &Path) -> String {
    text.replace(&dir.display().to_string(), "<dir>")
}
