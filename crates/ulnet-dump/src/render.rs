//! Turns decoded stream items into one line each, ordered by capture time across connections.

use std::fmt::{self, Write as _};
use std::io::{self, Write};

use ulnet_proto::addr::ProcessId;
use ulnet_proto::wire::ByteOrder;
use ulnet_proto::wire::acceptor::DowngradeReason;
use ulnet_proto::wire::header::{Body, Header, MsgType, WireHandle};
use ulnet_proto::wire::hello::{ConnType, UnknownHelloVersion};
use ulnet_proto::wire::ksock::ZcAck;
use ulnet_proto::wire::ping::{LNET_NI_STATUS_DOWN, LNET_NI_STATUS_UP, PingInfo};
use ulnet_proto::wire::stream::{Message, PayloadContent, StreamDecoder, StreamEvent};

use crate::reassembly::Stream;

/// Bytes of payload shown with `--hex`.
const HEX_PREVIEW: usize = 32;

/// Counts for the closing line.
#[derive(Debug, Default)]
pub struct Summary {
    streams: usize,
    messages: [u64; 4],
    noops: u64,
    errors: u64,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [ack, put, get, reply] = self.messages;
        write!(
            f,
            "# {} streams; LNet messages: PUT {put}, GET {get}, REPLY {reply}, ACK {ack}; \
             NOOP {}; errors {}",
            self.streams, self.noops, self.errors
        )
    }
}

/// Decodes every stream and writes its items in capture-time order.
pub fn render(streams: &[Stream], hex: bool, out: &mut impl Write) -> io::Result<Summary> {
    let mut summary = Summary { streams: streams.len(), ..Summary::default() };
    let start = streams.iter().filter_map(|s| s.times.first().map(|(_, t)| *t)).min();
    let start = start.unwrap_or(0);
    let mut lines: Vec<(u64, usize, usize, String)> = Vec::new();
    for (index, stream) in streams.iter().enumerate() {
        let mut push = |time: u64, text: String| {
            let order = lines.len();
            lines.push((time, index, order, text));
        };
        let first_time = stream.times.first().map_or(start, |(_, t)| *t);
        if stream.missed_start {
            push(first_time, "(capture starts mid-connection: decoding may fail)".into());
        }
        let bytes = stream.decodable();
        let decoder = if stream.to_acceptor {
            StreamDecoder::new(bytes)
        } else {
            StreamDecoder::active(bytes)
        };
        for item in decoder {
            match item {
                Ok(item) => {
                    let text = describe(&item.event, hex, &mut summary);
                    push(stream.time_at(item.offset), text);
                }
                Err(error) => {
                    summary.errors += 1;
                    push(
                        stream.time_at(error.offset),
                        format!("ERROR {error} (a kernel closes here)"),
                    );
                }
            }
        }
        if stream.lost_bytes > 0 {
            let last = stream.times.last().map_or(first_time, |(_, t)| *t);
            push(
                last,
                format!("({} bytes missing from the capture: decoding stopped)", stream.lost_bytes),
            );
        }
    }
    lines.sort_by_key(|(time, index, order, _)| (*time, *index, *order));
    for (time, index, _, text) in &lines {
        let Some(stream) = streams.get(*index) else { continue };
        let seconds = time.saturating_sub(start) as f64 / 1e9;
        writeln!(out, "{seconds:10.6} {} > {}  {text}", stream.source, stream.destination)?;
    }
    Ok(summary)
}

fn describe(event: &StreamEvent<'_>, hex: bool, summary: &mut Summary) -> String {
    match event {
        StreamEvent::ConnReq { request, byte_order } => {
            format!("CONNREQ {:?} to {}{}", request.version, request.target, swapped(*byte_order))
        }
        StreamEvent::Downgrade(DowngradeReason::UnifiedProtocolProbe) => {
            "PROBE LNET_PROTO_MAGIC: acceptor answers with a v1 connreq and closes".into()
        }
        StreamEvent::Downgrade(DowngradeReason::UnknownVersion(version)) => {
            format!("CONNREQ unknown version {version}: acceptor answers with v1 and closes")
        }
        StreamEvent::Hello { hello, byte_order, own_conn_type } => {
            let kind = if hello.conn_type == ConnType::NONE {
                "NONE (retry or refused; the connection closes)".to_string()
            } else {
                format!(
                    "{} (receiver's view {})",
                    conn_type(hello.conn_type),
                    conn_type(*own_conn_type)
                )
            };
            format!(
                "HELLO {:?} {kind} from {} incarnation {:#x} to {}{}",
                hello.version,
                ProcessId { nid: hello.src_nid, pid: hello.src_pid },
                hello.src_incarnation,
                hello.dst_nid,
                swapped(*byte_order)
            )
        }
        StreamEvent::UnknownHelloVersion(UnknownHelloVersion::LnetMagic { version, .. }) => {
            format!("HELLO unknown version {version}: answered with a NONE hello, closed")
        }
        StreamEvent::UnknownHelloVersion(UnknownHelloVersion::TcpMagic { major, minor }) => {
            format!("HELLO V1 magic with version {major}.{minor}: closed")
        }
        StreamEvent::Noop { ack, .. } => {
            summary.noops += 1;
            format!("NOOP {}", zc_ack(*ack).unwrap_or_else(|| "empty".into()))
        }
        StreamEvent::Message(message) => {
            if let Some(count) = summary.messages.get_mut(message.header.msg_type() as usize) {
                *count += 1;
            }
            message_line(message, hex)
        }
    }
}

fn message_line(message: &Message<'_>, hex: bool) -> String {
    let header = &message.header;
    let mut text = format!(
        "{} {} > {}",
        msg_type_name(header.msg_type()),
        ProcessId { nid: header.src_nid, pid: header.src_pid },
        ProcessId { nid: header.dest_nid, pid: header.dest_pid }
    );
    body_fields(header, &mut text);
    if let Some(ksock) = &message.ksock {
        if let Some(cookie) = ksock.zc_request() {
            let _ = write!(text, " zc_req {cookie}");
        }
    }
    if let Some(ack) = zc_ack(message.ack) {
        let _ = write!(text, " +{ack}");
    }
    match &message.content {
        PayloadContent::Opaque => {}
        PayloadContent::Ping(Ok((info, _))) => {
            let _ = write!(text, "\n{:>10} ping buffer: {}", "", ping_summary(info));
        }
        PayloadContent::Ping(Err(error)) => {
            let _ = write!(text, "\n{:>10} ping buffer REJECTED: {error}", "");
        }
        PayloadContent::Selftest(Ok((msg, _))) => {
            let _ = write!(
                text,
                "\n{:>10} selftest v{} feats {:#x}: {:?}",
                "", msg.version, msg.ses_feats, msg.body
            );
        }
        PayloadContent::Selftest(Err(error)) => {
            let _ = write!(text, "\n{:>10} selftest message REJECTED: {error}", "");
        }
    }
    if hex && !message.payload.is_empty() {
        let shown = message.payload.get(..HEX_PREVIEW).unwrap_or(message.payload);
        let hex: Vec<String> = shown.iter().map(|b| format!("{b:02x}")).collect();
        let _ = write!(text, "\n{:>10} payload {}", "", hex.join(" "));
        if message.payload.len() > HEX_PREVIEW {
            text.push_str(" ...");
        }
    }
    text
}

fn body_fields(header: &Header, text: &mut String) {
    let _ = match header.body {
        Body::Put { ack_wmd, match_bits, hdr_data, ptl_index, offset } => write!(
            text,
            " portal {ptl_index} match {match_bits:#x} offset {offset} hdr_data {hdr_data:#x} ack {} len {}",
            handle(ack_wmd),
            header.payload_length
        ),
        Body::Get { return_wmd, match_bits, ptl_index, src_offset, sink_length } => write!(
            text,
            " portal {ptl_index} match {match_bits:#x} src_offset {src_offset} sink_length {sink_length} return {}",
            handle(return_wmd)
        ),
        Body::Ack { dst_wmd, match_bits, mlength } => {
            write!(text, " match {match_bits:#x} mlength {mlength} to {}", handle(dst_wmd))
        }
        Body::Reply { dst_wmd } => {
            write!(text, " to {} len {}", handle(dst_wmd), header.payload_length)
        }
        Body::Hello { incarnation, conn_type: kind } => {
            write!(text, " incarnation {incarnation:#x} type {}", conn_type(ConnType(kind)))
        }
    };
}

fn msg_type_name(msg_type: MsgType) -> &'static str {
    match msg_type {
        MsgType::Ack => "ACK",
        MsgType::Put => "PUT",
        MsgType::Get => "GET",
        MsgType::Reply => "REPLY",
        MsgType::Hello => "HELLO",
    }
}

fn ping_summary(info: &PingInfo) -> String {
    const NAMES: [&str; 8] = [
        "BASE",
        "NI_STATUS",
        "RTE_DISABLED",
        "MULTI_RAIL",
        "DISCOVERY",
        "LARGE_ADDR",
        "PRIMARY_LARGE",
        "METADATA",
    ];
    let features: Vec<&str> = NAMES
        .iter()
        .enumerate()
        .filter(|(bit, _)| info.features & (1 << bit) != 0)
        .map(|(_, n)| *n)
        .collect();
    let nids: Vec<String> = info
        .nids
        .iter()
        .chain(&info.large)
        .map(|entry| {
            let status = match entry.status {
                LNET_NI_STATUS_UP => "up".to_string(),
                LNET_NI_STATUS_DOWN => "down".to_string(),
                other => format!("status {other:#x}"),
            };
            format!("{} {status}", entry.nid)
        })
        .collect();
    let primary = info.primary_nid().map_or("none".to_string(), |nid| nid.to_string());
    format!(
        "features {:#x} [{}] pid {} seq {} primary {primary}: {}",
        info.features,
        features.join(","),
        info.pid,
        info.sequence,
        nids.join(", ")
    )
}

fn zc_ack(ack: ZcAck) -> Option<String> {
    match ack {
        ZcAck::None => None,
        ZcAck::Keepalive => Some("keepalive".into()),
        ZcAck::Single(cookie) => Some(format!("zc_ack {cookie}")),
        ZcAck::Pair(a, b) => Some(format!("zc_ack {a},{b}")),
        ZcAck::Range(a, b) => Some(format!("zc_ack {a}..={b}")),
    }
}

fn handle(wmd: WireHandle) -> String {
    if wmd.is_none() {
        "none".into()
    } else {
        format!("{:#x}.{:#x}", wmd.interface_cookie, wmd.object_cookie)
    }
}

fn conn_type(kind: ConnType) -> String {
    match kind {
        ConnType::NONE => "NONE".into(),
        ConnType::ANY => "ANY".into(),
        ConnType::CONTROL => "CONTROL".into(),
        ConnType::BULK_IN => "BULK_IN".into(),
        ConnType::BULK_OUT => "BULK_OUT".into(),
        ConnType(other) => format!("type {other}"),
    }
}

fn swapped(byte_order: ByteOrder) -> &'static str {
    match byte_order {
        ByteOrder::LittleEndian => "",
        ByteOrder::BigEndian => " (byte-swapped)",
    }
}
