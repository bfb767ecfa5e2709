//! A live capture of two nodes on `lo`, decoded by tshark's LNet dissector: every PUT, ACK, GET
//! and REPLY shows up, and nothing is malformed.
//!
//! Optional: capturing needs tshark and the right to capture on `lo` (root, or the capture
//! capabilities); without them the test is skipped with a message.
//!
//! The dissector's known quirks (docs/protocol/wire.md §9) are kept out of the way: messages are small and
//! written whole (so a segment never ends inside a header; one segment may carry several, as
//! ulnet writes what one drain produced in one vectored write), no NOOPs (ulnet never requests
//! ZC-ACKs, and the keepalive is 30 s away). One false positive stays: a PUT's payload is handed
//! to the portal's Lustre sub-dissector, which flags anything that is not a Lustre RPC (seen with
//! TShark 4.0.17; docs/protocol/wire.md §9 item 8 lists the portals that have one); frames with such a PUT are allowed their `bad_buflen`, nothing else is.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::*;

#[test]
fn live_capture_decodes_without_malformed_frames() {
    let Some(mut capture) = Capture::start() else {
        return;
    };
    let port = capture.port;
    let (a, b) = (tcp_node(0, port), tcp_node(1, port));
    let mut messages = 0;
    for (round, size) in SIZES.into_iter().enumerate() {
        put_and_check(&a, &b, round as u64, &pattern(size, round as u8));
        let served = pattern(size, 50 + round as u8);
        let inbox = b.event_queue(4);
        b.post(11, round as u64, source(served.clone()), &inbox).unwrap();
        let reply = a.get_into(b.process_id(), 11, round as u64, vec![0; size], HANG_GUARD);
        assert_eq!(reply.unwrap(), served);
        messages += 4;
    }
    a.shutdown();
    b.shutdown();
    let rows = capture.finish();
    let decoded = rows.iter().filter(|row| !row[1].is_empty()).count();
    assert!(decoded >= messages, "{decoded} LNet messages decoded of {messages}: {rows:?}");
    for row in &rows {
        let [frame, msg_type, malformed, exception, bad_buflen] = &row[..] else {
            panic!("unexpected tshark row {row:?}");
        };
        assert_eq!(exception, "", "frame {frame}: dissector exception ({row:?})");
        // A PUT payload goes to the portal's Lustre sub-dissector, which flags anything that is
        // not a Lustre RPC (or, without one, a false bad_buflen: docs/protocol/wire.md §9 item 8).
        // Fields of a frame with several messages are comma-separated lists.
        let has = |field: &str, value: &str| field.split(',').any(|item| item == value);
        let put_payload_flagged = has(msg_type, "1") && has(bad_buflen, "1");
        if !put_payload_flagged {
            assert_eq!((malformed, bad_buflen), (&String::new(), &String::new()), "frame {frame}");
        }
    }
}

/// A running tshark writing `lo` traffic on a fresh port to a file.
struct Capture {
    child: Child,
    path: PathBuf,
    port: u16,
}

impl Capture {
    fn start() -> Option<Capture> {
        if Command::new("tshark").arg("--version").output().is_err() {
            eprintln!("skipped: tshark is not installed");
            return None;
        }
        let port = free_port();
        let path =
            std::env::temp_dir().join(format!("ulnet-tcp-{}-{port}.pcap", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let child = Command::new("tshark")
            // A large capture buffer: a 1 MiB burst on lo must not drop packets.
            .args(["-i", "lo", "-q", "-B", "256", "-F", "pcap"])
            .args(["-f", &format!("tcp port {port}"), "-w"])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .ok()?;
        let mut capture = Capture { child, path, port };
        // The file appears once capturing has started; an early exit means no permission.
        let start = Instant::now();
        while !capture.path.exists() {
            if let Ok(Some(_)) = capture.child.try_wait() {
                eprintln!("skipped: tshark cannot capture on lo (needs root or capture rights)");
                return None;
            }
            if start.elapsed() > Duration::from_secs(20) {
                eprintln!("skipped: tshark did not start capturing");
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(500));
        Some(capture)
    }

    /// Stops the capture (SIGINT, so it flushes) and decodes it: per frame, the number, the
    /// LNet message type, and the three problem markers.
    fn finish(&mut self) -> Vec<Vec<String>> {
        std::thread::sleep(Duration::from_millis(500));
        let _ = Command::new("kill").arg("-INT").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
        let output = Command::new("tshark")
            .arg("-n")
            .arg("-r")
            .arg(&self.path)
            .args(["-d", &format!("tcp.port=={},lnet", self.port)])
            .args([
                "-T",
                "fields",
                "-E",
                "separator=|",
                "-e",
                "frame.number",
                "-e",
                "lnet.msg_type",
            ])
            .args(["-e", "_ws.malformed", "-e", "_ws.malformed.expert", "-e", "lnet.bad_buflen"])
            .output()
            .unwrap();
        assert!(output.status.success(), "tshark -r: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(|line| line.split('|').map(str::to_owned).collect())
            .collect()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::env::var_os("ULNET_KEEP_CAPTURE").is_none() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
