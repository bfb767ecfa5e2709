//! Running a `ulnetctl` as a process and a scratch directory for its socket: shared by
//! ulnetctl's tests and ulnetd's daemon tests (which include this file by path and run their
//! own binary under the name `ulnetctl`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fresh directory under the temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// `<prefix>-<pid>-<tag>-<n>`; keep it short: Unix socket paths are limited to 107 bytes.
    pub fn named(prefix: &str, tag: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("{prefix}-{}-{tag}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The outcome of one `ulnetctl` run.
pub struct Run {
    pub args: Vec<String>,
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// What a snapshot records: the command line, exit status, `stdout` (the run's, or what a
    /// test made of it) and stderr.
    pub fn transcript_of(&self, stdout: &str) -> String {
        format!(
            "$ ulnetctl {}\n--- exit status {}\n--- stdout\n{}--- stderr\n{}--- end",
            self.args.join(" "),
            self.code,
            stdout,
            self.stderr
        )
    }
}

/// Runs `program` with `args` and `stdin` as its standard input, `$ULNET_SOCKET` set to
/// `socket` (unset for `None`) and `POSIXLY_CORRECT` unset.
pub fn run_program(program: &Path, args: &[&str], socket: Option<&Path>, stdin: &str) -> Run {
    let mut command = Command::new(program);
    command
        .args(args)
        .env_remove("POSIXLY_CORRECT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match socket {
        Some(path) => command.env("ULNET_SOCKET", path),
        None => command.env_remove("ULNET_SOCKET"),
    };
    let mut child = command.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).unwrap();
    drop(input);
    let output = child.wait_with_output().unwrap();
    Run {
        args: args.iter().map(|a| a.to_string()).collect(),
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}
