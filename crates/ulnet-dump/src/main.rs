//! `ulnet-dump`: decodes LNet over TCP from a pcap capture, including what tshark's dissector
//! cannot show (acceptor connreqs, socklnd hellos, the 96-byte large-NID header of V4, ping
//! buffers and lnet_selftest RPCs). Without a file it decodes an embedded capture made by ulnet's
//! own encoders: a V3 exchange over IPv4 and a V4 exchange over IPv6.

mod demo;
mod reassembly;
mod render;

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

/// Decode LNet-over-TCP traffic from a pcap file.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// A classic pcap file (`tcpdump -w`). Omit it to decode the embedded example capture.
    file: Option<PathBuf>,
    /// The acceptor port: connections to it are LNet (Lustre's default is 988).
    #[arg(long, default_value_t = 988)]
    port: u16,
    /// Also print each LNet payload's first bytes in hex.
    #[arg(long)]
    hex: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let capture = match &args.file {
        Some(path) => std::fs::read(path).with_context(|| format!("reading {}", path.display()))?,
        None => {
            println!("# embedded example: what two ulnet nodes put on the wire (V3/IPv4, V4/IPv6)");
            demo::capture()
        }
    };
    let streams = reassembly::streams(&capture, args.port)?;
    let mut out = std::io::stdout().lock();
    let summary = render::render(&streams, args.hex, &mut out)?;
    writeln!(out, "{summary}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The embedded capture decodes completely: every connection, every message, no error.
    #[test]
    fn embedded_capture_decodes_without_errors() {
        let capture = demo::capture();
        let streams = reassembly::streams(&capture, 988).unwrap();
        assert_eq!(streams.len(), 4);
        let mut out = Vec::new();
        let summary = render::render(&streams, true, &mut out).unwrap().to_string();
        assert_eq!(
            summary,
            "# 4 streams; LNet messages: PUT 3, GET 3, REPLY 3, ACK 1; NOOP 1; errors 0"
        );
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("CONNREQ V2 to fd00::3@tcp"), "{text}");
        assert!(text.contains("HELLO V4 CONTROL"), "{text}");
        assert!(text.contains("features 0x7e"), "{text}");
        assert!(text.contains("MakeSessionReply"), "{text}");
    }

    /// A capture cut anywhere still decodes up to the cut, and reports it, without panicking.
    #[test]
    fn truncated_captures_never_panic() {
        let capture = demo::capture();
        for cut in (0..capture.len()).step_by(97) {
            if let Ok(streams) = reassembly::streams(&capture[..cut], 988) {
                let mut out = Vec::new();
                render::render(&streams, false, &mut out).unwrap();
            }
        }
    }
}
