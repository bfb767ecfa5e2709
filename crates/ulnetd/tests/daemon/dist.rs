//! The operations kit (`dist/`, `examples/`) against the programs it describes: every example
//! configuration passes `--check` and the client-router-server examples route a ping; the
//! systemd unit has what `Type=notify` needs and passes `systemd-analyze verify`; the man
//! pages render without groff warnings and name every option and command; the shell
//! completions offer every command and option the programs list; the container recipe runs
//! unprivileged on a high port. Where a tool (bash, groff, systemd-analyze) is missing, the
//! part that needs it says so and is skipped (under CI, which installs them, it fails); the
//! rest still runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use ulnet_selftest::cli::{self, Env, NoConsole};

use crate::support::{Process, SIGTERM, TempDir, ULNETD, ulnetctl_path};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(root().join(relative))
        .unwrap_or_else(|error| panic!("{relative}: {error}"))
}

/// Whether `program` runs here (`--version`). Under CI, which installs them (`.ci/run`), a
/// missing one fails the test instead of skipping its part.
fn have(program: &str) -> bool {
    let found =
        Command::new(program).arg("--version").output().is_ok_and(|out| out.status.success());
    if !found {
        assert!(std::env::var_os("CI").is_none(), "{program} is missing under CI");
        eprintln!("{program} is not installed: its part of this test is skipped");
    }
    found
}

fn example_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    files
}

// ------------------------------------------------------------------------ examples

#[test]
fn every_example_configuration_passes_check() {
    let files = example_files();
    let names: Vec<String> =
        files.iter().map(|path| path.file_name().unwrap().to_string_lossy().into_owned()).collect();
    for wanted in ["client.yaml", "router.yaml", "server.yaml"] {
        assert!(names.iter().any(|name| name == wanted), "examples/{wanted} missing: {names:?}");
    }
    for file in files {
        let out = Command::new(ULNETD).arg("--check").arg(&file).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && stderr.is_empty(), "{}: {stderr}", file.display());
    }
}

/// The router, server and client examples as written, on `prefix`.1.x / `prefix`.2.x and a
/// port of the test's own, started in that order; also the function that localises an
/// example's text the same way.
fn start_examples(prefix: &str) -> (Vec<Process>, impl Fn(&str) -> String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let prefix = prefix.to_string();
    let local = move |name: &str| {
        read(&format!("examples/{name}.yaml"))
            .replace("accept_port: 7988", &format!("accept_port: {port}"))
            .replace("127.0.1.", &format!("{prefix}.1."))
            .replace("127.0.2.", &format!("{prefix}.2."))
    };
    let daemons = ["router", "server", "client"]
        .iter()
        .map(|name| {
            let process = Process::spawn(Some(&local(name)), &[]);
            assert!(process.ready.is_some(), "{name}: {}", process.log());
            process
        })
        .collect();
    (daemons, local)
}

#[test]
fn the_client_router_server_examples_route_a_ping() {
    let (mut daemons, _) = start_examples("127.58");
    let client = &daemons[2];
    let ping = client.ulnetctl(&["ping", "127.58.2.2@tcp1"]);
    assert_eq!(ping.code, 0, "{}", ping.transcript());
    assert!(ping.stdout.contains("primary nid: 127.58.2.2@tcp1"), "{}", ping.stdout);
    let routes = client.ulnetctl(&["route", "show"]);
    assert!(routes.stdout.contains("gateway: 127.58.1.1@tcp"), "{}", routes.stdout);
    for daemon in &mut daemons {
        assert_eq!(daemon.signal_and_wait(SIGTERM), 0, "{}", daemon.log());
    }
}

#[test]
fn a_ulst_console_configured_by_file_drives_nodes_across_the_router() {
    // `ulst` is another package's binary: built by `cargo test --workspace` (README's
    // command), maybe not by `cargo test -p ulnetd`.
    let ulst = Path::new(ULNETD).with_file_name("ulst");
    if !ulst.exists() {
        eprintln!("{} is not built: skipped (cargo test --workspace builds it)", ulst.display());
        return;
    }
    let (mut daemons, local) = start_examples("127.59");
    // The console: the client's configuration on an address of its own.
    let dir = TempDir::new("ulstcfg");
    let config =
        dir.file("console.yaml", &local("client").replace("127.59.1.2@tcp", "127.59.1.3@tcp"));
    let ulst = |line: &str| {
        let out = Command::new(&ulst)
            .args(line.split_whitespace())
            .env("ULST_CONFIG", &config)
            .env("ULST_SOCKET", dir.path("console.sock"))
            .env("ULNETD", ULNETD)
            .env("LST_SESSION", std::process::id().to_string())
            .env_remove("ULST_NID")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "ulst {line}: {text}");
        text
    };
    ulst("new_session routed");
    ulst("add_group c 127.59.1.2@tcp");
    ulst("add_group s 127.59.2.2@tcp1");
    ulst("add_batch bulk");
    ulst(
        "add_test --batch bulk --loop 40 --concurrency 4 --from c --to s brw write size=64K check=full",
    );
    ulst(
        "add_test --batch bulk --loop 40 --concurrency 4 --from c --to s brw read size=64K check=full",
    );
    ulst("run bulk");
    let finished = (0..600).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(100));
        ulst("query bulk").ends_with("is stopped\n")
    });
    assert!(finished, "the routed batch ends");
    assert_eq!(
        ulst("show_error c s"),
        "c:\nTotal 0 error nodes in c\ns:\nTotal 0 error nodes in s\n"
    );
    ulst("end_session");
    // The console reached the server, and the client the server, through the router.
    let stats = daemons[0].ulnetctl(&["stats", "show"]).stdout;
    let routed: u64 = stats
        .lines()
        .find_map(|line| line.trim().strip_prefix("route_count: "))
        .and_then(|count| count.parse().ok())
        .unwrap_or(0);
    assert!(routed > 160, "the router forwarded the batch: {stats}");
    for daemon in &mut daemons {
        assert_eq!(daemon.signal_and_wait(SIGTERM), 0, "{}", daemon.log());
    }
}

// ------------------------------------------------------------------------ systemd

/// The unit's `Key=value` lines by section.
fn unit_keys(text: &str) -> BTreeMap<(String, String), Vec<String>> {
    let mut keys = BTreeMap::new();
    let mut section = String::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')) {
            section = name.to_string();
            continue;
        }
        let (key, value) = line.split_once('=').unwrap_or_else(|| panic!("not key=value: {line}"));
        keys.entry((section.clone(), key.trim().to_string()))
            .or_insert_with(Vec::new)
            .push(value.trim().to_string());
    }
    keys
}

#[test]
fn the_systemd_unit_is_type_notify_with_reload_and_graceful_stop() {
    let text = read("dist/systemd/ulnetd.service");
    let keys = unit_keys(&text);
    let value = |section: &str, key: &str| {
        keys.get(&(section.to_string(), key.to_string()))
            .and_then(|values| values.last().cloned())
            .unwrap_or_else(|| panic!("[{section}] {key}= missing"))
    };
    assert_eq!(value("Service", "Type"), "notify");
    let start = value("Service", "ExecStart");
    assert!(start.contains("ulnetd --config /etc/ulnet/ulnetd.yaml"), "{start}");
    assert!(value("Service", "ExecReload").contains("-HUP $MAINPID"));
    assert_eq!(value("Service", "KillSignal"), "SIGTERM");
    // Configuration errors (66, 78) are not retried.
    let no_restart = value("Service", "RestartPreventExitStatus");
    assert!(no_restart.contains("66") && no_restart.contains("78"), "{no_restart}");
    assert_eq!(value("Service", "RuntimeDirectory"), "ulnet");
    assert!(start.contains("--socket /run/ulnet/ulnetd.sock"), "{start}");
    assert_eq!(value("Install", "WantedBy"), "multi-user.target");
    // The file the unit starts the node with must be one ulnetd accepts: the router example.
    if !have("systemd-analyze") {
        return;
    }
    let dir = TempDir::new("unit");
    let unit = dir.file("ulnetd.service", &text.replace("/usr/local/bin/ulnetd", ULNETD));
    // Documentation=man:... is checked against the man pages of this tree.
    let man8 = dir.path("man/man8");
    std::fs::create_dir_all(&man8).unwrap();
    for page in ["ulnetd.8", "ulnetctl.8", "ulst.8"] {
        std::fs::copy(root().join("dist/man").join(page), man8.join(page)).unwrap();
    }
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .env("MANPATH", dir.path("man"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.trim().is_empty(), "systemd-analyze verify: {stderr}");
}

// ------------------------------------------------------------------------ man pages

fn ulnetctl(args: &[&str]) -> String {
    let out = Command::new(ulnetctl_path())
        .args(args)
        .env("ULNET_SOCKET", "/nonexistent/ulnetd.sock")
        .output()
        .unwrap();
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn ulst(line: &str) -> String {
    let (_, stdout, stderr) = cli::run_captured(line, &Env::default(), &NoConsole, false);
    format!("{stdout}{stderr}")
}

/// The words of a `--list-commands` listing, without the parser's own.
fn listed(text: &str) -> Vec<String> {
    const BUILTIN: [&str; 10] = [
        "quit",
        "exit",
        "help",
        "--help",
        "version",
        "--version",
        "list-commands",
        "--list-commands",
        "--ignore_errors",
        "ignore_errors",
    ];
    text.split_whitespace().filter(|word| !BUILTIN.contains(word)).map(str::to_string).collect()
}

/// The long options a help text names (`--name`, `--a|b` as `--a` and `--b`).
fn long_options(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for word in text.split(|c: char| c.is_whitespace() || "[]():,".contains(c)) {
        let Some(name) = word.strip_prefix("--") else { continue };
        for part in name.split('|') {
            let part: String = part
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                .collect();
            let option = format!("--{part}");
            if !part.is_empty() && option != "--help" && !found.contains(&option) {
                found.push(option);
            }
        }
    }
    found
}

/// The man pages in dist/man, one per program an administrator runs.
const PAGES: [&str; 4] = ["ulnetd", "ulnetctl", "ulst", "ulnet-legacy2yaml"];

#[test]
fn man_pages_render_cleanly_and_name_every_option_and_command() {
    for page in PAGES {
        let text = read(&format!("dist/man/{page}.8"));
        for section in ["NAME", "SYNOPSIS", "DESCRIPTION", "SEE ALSO"] {
            assert!(text.contains(&format!("\n.SH {section}\n")), "{page}.8 lacks {section}");
        }
        assert!(text.contains(&format!(".TH {} 8 ", page.to_uppercase())), "{page}.8 .TH");
    }
    // roff spells a hyphen-minus `\-`.
    let plain = |page: &str| read(&format!("dist/man/{page}.8")).replace("\\-", "-");
    let ulnetd_help =
        String::from_utf8(Command::new(ULNETD).arg("--help").output().unwrap().stdout).unwrap();
    let ulnetd_page = plain("ulnetd");
    for option in long_options(&ulnetd_help) {
        assert!(ulnetd_page.contains(&option), "ulnetd.8 does not name {option}");
    }
    let ulnetctl_page = plain("ulnetctl");
    for command in listed(&ulnetctl(&["--list-commands"])) {
        assert!(ulnetctl_page.contains(&command), "ulnetctl.8 does not name {command}");
    }
    let ulst_page = plain("ulst");
    for command in listed(&ulst("--list-commands")) {
        assert!(ulst_page.contains(&command), "ulst.8 does not name {command}");
    }
    let converter = env!("CARGO_BIN_EXE_ulnet-legacy2yaml");
    let converter_help =
        String::from_utf8(Command::new(converter).arg("--help").output().unwrap().stdout).unwrap();
    let converter_page = plain("ulnet-legacy2yaml");
    let options = long_options(&converter_help);
    assert!(options.contains(&"--default-hop".to_string()), "{converter_help}");
    for option in options {
        assert!(converter_page.contains(&option), "ulnet-legacy2yaml.8 does not name {option}");
    }
    if !have("groff") {
        return;
    }
    for page in PAGES {
        let out = Command::new("groff")
            .args(["-man", "-Tutf8", "-ww", "-z"])
            .arg(root().join(format!("dist/man/{page}.8")))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && stderr.is_empty(), "groff on {page}.8: {stderr}");
    }
}

// ------------------------------------------------------------------------ completions

/// The `["path"]="words"` table of a bash completion script.
fn completion_table(text: &str) -> BTreeMap<String, Vec<String>> {
    text.lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("[\"")?;
            let (path, words) = rest.split_once("\"]=\"")?;
            let words = words.strip_suffix('"')?;
            Some((path.to_string(), words.split_whitespace().map(str::to_string).collect()))
        })
        .collect()
}

/// ulnetctl's command tree as the program lists it: each command path with its subcommands
/// or the long options its help names.
fn ulnetctl_tree() -> BTreeMap<String, Vec<String>> {
    let mut tree = BTreeMap::new();
    let top = listed(&ulnetctl(&["--list-commands"]));
    tree.insert("ulnetctl".to_string(), top.clone());
    for command in top {
        if !ulnetctl(&["help", &command]).contains('{') {
            tree.insert(
                format!("ulnetctl {command}"),
                long_options(&ulnetctl(&[&command, "--help"])),
            );
            continue;
        }
        let subcommands = listed(&ulnetctl(&[&command, "--list-commands"]));
        tree.insert(format!("ulnetctl {command}"), subcommands.clone());
        for sub in subcommands {
            let nested = ulnetctl(&[&command, &sub, "--list-commands"]);
            if nested.starts_with("quit") {
                let leaves = listed(&nested);
                tree.insert(format!("ulnetctl {command} {sub}"), leaves.clone());
                for leaf in leaves {
                    let help = ulnetctl(&[&command, &sub, &leaf, "--help"]);
                    tree.insert(format!("ulnetctl {command} {sub} {leaf}"), long_options(&help));
                }
            } else {
                let help = ulnetctl(&[&command, &sub, "--help"]);
                tree.insert(format!("ulnetctl {command} {sub}"), long_options(&help));
            }
        }
    }
    tree
}

fn ulst_tree() -> BTreeMap<String, Vec<String>> {
    let mut tree = BTreeMap::new();
    let top = listed(&ulst("--list-commands"));
    tree.insert("ulst".to_string(), top.clone());
    for command in top {
        tree.insert(format!("ulst {command}"), long_options(&ulst(&format!("help {command}"))));
    }
    tree
}

/// Every path of `tree` is in `table` with at least its words; the table has no path the
/// program does not have.
fn check_covers(
    script: &str,
    table: &BTreeMap<String, Vec<String>>,
    tree: &BTreeMap<String, Vec<String>>,
) {
    for (path, words) in tree {
        let offered = table.get(path).unwrap_or_else(|| panic!("{script}: no entry for `{path}`"));
        for word in words {
            assert!(offered.contains(word), "{script}: `{path}` does not offer {word}");
        }
    }
    for path in table.keys() {
        assert!(tree.contains_key(path), "{script}: `{path}` is no command of the program");
    }
}

#[test]
fn completions_offer_every_command_and_option() {
    let ulnetctl_script = read("dist/completions/ulnetctl.bash");
    check_covers("ulnetctl.bash", &completion_table(&ulnetctl_script), &ulnetctl_tree());
    let ulst_script = read("dist/completions/ulst.bash");
    check_covers("ulst.bash", &completion_table(&ulst_script), &ulst_tree());
    for zsh in ["_ulnetctl", "_ulst"] {
        let text = read(&format!("dist/completions/{zsh}"));
        assert!(text.starts_with(&format!("#compdef {}", &zsh[1..])), "{zsh}");
    }
    if !have("bash") {
        return;
    }
    // The functions themselves, as bash calls them on a TAB.
    let complete = |script: &str, function: &str, words: &[&str]| {
        let words: Vec<String> = words.iter().map(|word| format!("'{word}'")).collect();
        let program = format!(
            "source '{}' && COMP_WORDS=({}) && COMP_CWORD={} && {function} && printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            root().join(script).display(),
            words.join(" "),
            words.len() - 1
        );
        let out = Command::new("bash").arg("-c").arg(&program).output().unwrap();
        assert!(out.status.success(), "{program}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|line| line.trim().to_string())
            .collect::<Vec<_>>()
    };
    let bash_ulnetctl = "dist/completions/ulnetctl.bash";
    assert_eq!(complete(bash_ulnetctl, "_ulnetctl", &["ulnetctl", "ne"]), ["net"]);
    assert_eq!(complete(bash_ulnetctl, "_ulnetctl", &["ulnetctl", "net", "a"]), ["add"]);
    assert_eq!(
        complete(
            bash_ulnetctl,
            "_ulnetctl",
            &["ulnetctl", "peer", "add", "--prim_nid", "1@tcp", "--no"]
        ),
        ["--non_mr"]
    );
    assert_eq!(
        complete(bash_ulnetctl, "_ulnetctl", &["ulnetctl", "fault", "drop", "add", "--he"]),
        ["--health_error"]
    );
    let bash_ulst = "dist/completions/ulst.bash";
    assert_eq!(complete(bash_ulst, "_ulst", &["ulst", "add_t"]), ["add_test"]);
    assert_eq!(complete(bash_ulst, "_ulst", &["ulst", "stat", "--de"]), ["--delay"]);
}

#[test]
fn zsh_completions_load_the_bash_ones() {
    if !have("zsh") {
        return;
    }
    // As zsh's bashcompinit calls the function (`compgen -F`); zsh itself then filters the
    // candidates by the word being completed, so they are checked as a set.
    let dir = root().join("dist/completions");
    let script = format!(
        "autoload -U compinit && compinit -u\n\
         export ULNET_BASH_COMPLETIONS='{dir}'\n\
         source '{dir}/_ulnetctl'\n\
         try() {{\n\
           local -a COMP_WORDS COMPREPLY; local COMP_CWORD\n\
           words=(\"$@\"); CURRENT=$#; (( COMP_CWORD = CURRENT - 1 ))\n\
           COMP_WORDS=( \"${{words[@]}}\" )\n\
           print -r -- \"$(compgen -F _ulnetctl -- ${{words[CURRENT]}} | tr '\\n' ' ')\"\n\
         }}\n\
         try ulnetctl net a\n\
         try ulnetctl peer add --prim_nid 1@tcp --no\n",
        dir = dir.display()
    );
    let out = Command::new("zsh").arg("-f").arg("-c").arg(&script).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<Vec<&str>> =
        text.lines().map(|line| line.split_whitespace().collect()).collect();
    assert_eq!(lines.len(), 2, "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(lines[0], ["add", "del", "show", "set"]);
    assert!(lines[1].contains(&"--non_mr") && lines[1].iter().all(|word| word.starts_with("--")));
}

// ------------------------------------------------------------------------ container

#[test]
fn the_container_recipe_runs_unprivileged_on_a_high_port() {
    let text = read("dist/container/Containerfile");
    let directives: Vec<(String, String)> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| {
            line.split_once(' ').map(|(word, rest)| (word.to_string(), rest.to_string()))
        })
        .collect();
    let last = |word: &str| {
        directives.iter().rev().find(|(name, _)| name == word).map(|(_, rest)| rest.clone())
    };
    let user = last("USER").expect("a USER");
    assert!(!user.starts_with('0') && !user.starts_with("root"), "runs as {user}");
    let exposed = last("EXPOSE").expect("EXPOSE");
    for port in exposed.split_whitespace() {
        let number: u16 = port.trim_end_matches("/tcp").parse().unwrap();
        assert!(number >= 1024, "port {number} needs privileges");
    }
    assert!(
        text.contains("HEALTHCHECK") && text.contains("\"ulnetctl\""),
        "a ulnetctl health check"
    );
    let command = last("CMD").expect("CMD");
    assert!(command.starts_with("[\"ulnetd\"") && command.contains("--metrics"), "{command}");
    // The configuration it ships, on lo instead of the container's eth0.
    let config = read("dist/container/ulnetd.yaml");
    assert!(config.contains("accept_port: 7988"), "{config}");
    let dir = TempDir::new("container");
    let file = dir.file("ulnetd.yaml", &config.replace("eth0", "lo"));
    let out = Command::new(ULNETD).arg("--check").arg(&file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
