//! lnetctl's error reports (docs/protocol/cli.md §2) and exit statuses.
//!
//! lustre: lnet/utils/lnetctl.c `yaml_lnet_print_error()`; lnet/utils/lnetconfig/cyaml.c
//! `cYAML_build_error()`.

use crate::emit::{LibyamlStyle, Scalar, ScalarStyle, Yaml};

/// The operation word heading a netlink error report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorOp {
    /// `NLM_F_CREATE` requests.
    Add,
    /// `NLM_F_REPLACE` requests.
    Set,
    /// Requests without flags.
    Del,
    /// `NLM_F_DUMP` requests (and anything unrecognised).
    Show,
    /// `ping` and `discover`.
    Manage,
    /// Any error of `lnet configure`/`unconfigure` (command `lnet`).
    Configure,
}

impl ErrorOp {
    pub fn name(self) -> &'static str {
        match self {
            Self::Add => "add",
            Self::Set => "set",
            Self::Del => "del",
            Self::Show => "show",
            Self::Manage => "manage",
            Self::Configure => "configure",
        }
    }
}

/// A dialect-N error report (stderr), as `yaml_lnet_print_error()` writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetlinkError {
    pub op: ErrorOp,
    /// The command's object: `net`, `peer`, `route`, `import`, `ping`, ...
    pub object: String,
    /// Negative errno as the report shows it.
    pub errno: i32,
    pub descr: String,
}

impl NetlinkError {
    pub fn new(
        op: ErrorOp,
        object: impl Into<String>,
        errno: i32,
        descr: impl Into<String>,
    ) -> Self {
        Self { op, object: object.into(), errno, descr: descr.into() }
    }

    /// The report: an explicit YAML document; the description is a double-quoted scalar
    /// event, which libyaml prefixes with a `!` tag.
    pub fn render(&self) -> String {
        Yaml::map([(
            self.op.name(),
            Yaml::seq([Yaml::map([
                (self.object.as_str(), Yaml::plain("")),
                ("errno", Yaml::int(self.errno)),
                (
                    "descr",
                    Yaml::Scalar(Scalar::event(self.descr.as_str(), ScalarStyle::DoubleQuoted)),
                ),
            ])]),
        )])
        .to_string_libyaml(LibyamlStyle::ERROR_N)
    }
}

/// One entry of a cYAML error tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CyamlErrorEntry {
    /// `add`, `del`, `show`, `manage`, `set`, `parser`, `yaml`.
    pub cmd: String,
    /// What failed: `numa_range`, `route`, `net`, `maximum recovery ping interval`, ...
    pub entity: String,
    pub seq_no: Option<i32>,
    pub errno: i32,
    /// Printed as is: lnetctl's descriptions mostly carry their own double quotes.
    pub descr: String,
}

impl CyamlErrorEntry {
    /// An entry whose description is wrapped in double quotes as most of lnetctl's are.
    pub fn quoted(cmd: &str, entity: &str, errno: i32, descr: &str) -> Self {
        Self {
            cmd: cmd.to_string(),
            entity: entity.to_string(),
            seq_no: None,
            errno,
            descr: format!("\"{descr}\""),
        }
    }
}

/// A dialect-C error tree (stderr): entries are grouped under their command in the order the
/// commands first appear, as `cYAML_build_error()` appends them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CyamlError {
    pub entries: Vec<CyamlErrorEntry>,
}

impl CyamlError {
    pub fn render(&self) -> String {
        let mut commands: Vec<(&str, Vec<Yaml>)> = Vec::new();
        for entry in &self.entries {
            let mut fields: Vec<(&str, Yaml)> = Vec::new();
            if let Some(seq_no) = entry.seq_no {
                fields.push(("seq_no", Yaml::c_number(seq_no)));
            }
            fields.push(("errno", Yaml::c_number(entry.errno)));
            fields.push(("descr", Yaml::plain(entry.descr.as_str())));
            let item = Yaml::map([(entry.entity.as_str(), Yaml::map(fields))]);
            match commands.iter_mut().find(|(cmd, _)| *cmd == entry.cmd) {
                Some((_, items)) => items.push(item),
                None => commands.push((entry.cmd.as_str(), vec![item])),
            }
        }
        Yaml::map(commands.into_iter().map(|(cmd, items)| (cmd, Yaml::Seq(items)))).to_string_c()
    }
}

/// The process exit status for a handler's return value: the low 8 bits (`-22` → 234).
pub fn exit_status(rc: i32) -> u8 {
    // Truncation to the low byte is exactly what the shell sees from exit(rc).
    rc as u8
}

/// glibc's `strerror()` text for the errnos LNet reports (positive errno).
pub fn strerror(errno: i32) -> String {
    let text = match errno {
        0 => "Success",
        1 => "Operation not permitted",
        2 => "No such file or directory",
        3 => "No such process",
        4 => "Interrupted system call",
        5 => "Input/output error",
        6 => "No such device or address",
        7 => "Argument list too long",
        11 => "Resource temporarily unavailable",
        12 => "Cannot allocate memory",
        13 => "Permission denied",
        14 => "Bad address",
        16 => "Device or resource busy",
        17 => "File exists",
        19 => "No such device",
        22 => "Invalid argument",
        28 => "No space left on device",
        34 => "Numerical result out of range",
        42 => "No message of desired type",
        61 => "No data available",
        71 => "Protocol error",
        90 => "Message too long",
        95 => "Operation not supported",
        100 => "Network is down",
        101 => "Network is unreachable",
        103 => "Software caused connection abort",
        104 => "Connection reset by peer",
        108 => "Cannot send after transport endpoint shutdown",
        110 => "Connection timed out",
        111 => "Connection refused",
        112 => "Host is down",
        113 => "No route to host",
        114 => "Operation already in progress",
        115 => "Operation now in progress",
        125 => "Operation canceled",
        _ => return format!("Unknown error {errno}"),
    };
    text.to_string()
}
