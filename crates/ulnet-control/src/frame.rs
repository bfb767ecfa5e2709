//! Framing: each message is a 4-byte little-endian length followed by that many bytes of
//! JSON, an envelope carrying the protocol version and the request or the result.
//!
//! ```text
//! frame    := len:u32le json[len]
//! request  := {"version": 1, "request": {"command": "net_show", "args": {...}}}
//! response := {"version": 1, "result": {"Ok": {"kind": "nets", "data": [...]}}}
//!           | {"version": 1, "result": {"Err": {"error": "not_configured"}}}
//! ```
//!
//! Reading is total: a short stream, a length above the reader's bound, bytes that are not
//! the JSON of an envelope, and another protocol version are distinct errors. The body buffer
//! grows with the bytes actually received, so a lying length prefix cannot make the reader
//! allocate it.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};

use crate::message::{ControlError, Request, Response};

/// Bumped on any incompatible change to [`Request`], [`Response`] or their data.
pub const PROTOCOL_VERSION: u32 = 1;

/// Bytes of the length prefix.
pub const HEADER_LEN: usize = 4;

/// Largest request the daemon reads: an `import` carries the whole input, which
/// ulnet-config bounds at [`ulnet_config::model::MAX_IMPORT_LEN`] (1 MiB); JSON escaping can
/// at most double it (control characters aside, which YAML does not allow raw), plus room
/// for the envelope.
pub const MAX_REQUEST_LEN: usize = 2 * ulnet_config::model::MAX_IMPORT_LEN + (64 << 10);

/// Largest response the client reads: a `peer show -v 4` or `export` of a large node. A peer
/// NI at the highest level is under 2 KiB of JSON, so this holds tens of thousands of them
/// (LNet's own limit on peers is memory).
pub const MAX_RESPONSE_LEN: usize = 64 << 20;

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The peer closed the stream cleanly between frames.
    #[error("connection closed")]
    Closed,
    /// The stream ended inside a frame.
    #[error("connection closed after {received} of {expected} bytes of a frame")]
    Truncated { expected: usize, received: usize },
    /// The length prefix is above the reader's bound; nothing of the body was read.
    #[error("frame of {len} bytes exceeds the limit of {max}")]
    TooLarge { len: usize, max: usize },
    /// The read timed out.
    #[error("timed out waiting for a frame")]
    TimedOut,
    #[error("I/O error: {0}")]
    Io(#[source] io::Error),
}

/// Why a frame's body is not a message of this protocol.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Not JSON, or not the JSON of an envelope.
    #[error("malformed message: {0}")]
    Malformed(String),
    /// A well-formed envelope of another protocol version.
    #[error("protocol version {theirs}, expected {ours}")]
    VersionMismatch { ours: u32, theirs: u32 },
}

/// Writes one frame. The header and body go out in one `write_all` so a frame is never
/// interleaved with another writer's.
pub fn write_frame(writer: &mut impl Write, body: &[u8]) -> io::Result<()> {
    let len = u32::try_from(body.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame body over 4 GiB"))?;
    let mut frame = Vec::with_capacity(HEADER_LEN + body.len());
    frame.extend_from_slice(&len.to_le_bytes());
    frame.extend_from_slice(body);
    writer.write_all(&frame)?;
    writer.flush()
}

/// Reads one frame of at most `max_len` body bytes.
pub fn read_frame(reader: &mut impl Read, max_len: usize) -> Result<Vec<u8>, FrameError> {
    let mut header = [0u8; HEADER_LEN];
    let received = read_full(reader, &mut header)?;
    if received == 0 {
        return Err(FrameError::Closed);
    }
    if received < HEADER_LEN {
        return Err(FrameError::Truncated { expected: HEADER_LEN, received });
    }
    // A u32 always fits in usize on the 32- and 64-bit targets this runs on.
    let len = u32::from_le_bytes(header) as usize;
    if len > max_len {
        return Err(FrameError::TooLarge { len, max: max_len });
    }
    // Grow with the data, not with the claimed length.
    let mut body = Vec::with_capacity(len.min(64 << 10));
    let mut limited = reader.take(len as u64);
    loop {
        match limited.read_to_end(&mut body) {
            Ok(_) => break,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(io_error(error)),
        }
    }
    if body.len() < len {
        return Err(FrameError::Truncated {
            expected: HEADER_LEN + len,
            received: HEADER_LEN + body.len(),
        });
    }
    Ok(body)
}

/// The JSON body of a request frame.
pub fn encode_request(request: &Request) -> Vec<u8> {
    encode(&RequestEnvelope { version: PROTOCOL_VERSION, request: request.clone() })
}

/// The JSON body of a response frame.
pub fn encode_response(result: &Result<Response, ControlError>) -> Vec<u8> {
    encode(&ResponseEnvelope { version: PROTOCOL_VERSION, result: result.clone() })
}

/// Parses a request body, checking the version before the contents.
pub fn decode_request(body: &[u8]) -> Result<Request, DecodeError> {
    check_version(body)?;
    let envelope: RequestEnvelope =
        serde_json::from_slice(body).map_err(|e| DecodeError::Malformed(e.to_string()))?;
    Ok(envelope.request)
}

/// Parses a response body, checking the version before the contents.
pub fn decode_response(body: &[u8]) -> Result<Result<Response, ControlError>, DecodeError> {
    check_version(body)?;
    let envelope: ResponseEnvelope =
        serde_json::from_slice(body).map_err(|e| DecodeError::Malformed(e.to_string()))?;
    Ok(envelope.result)
}

#[derive(Serialize, Deserialize)]
struct RequestEnvelope {
    version: u32,
    request: Request,
}

#[derive(Serialize, Deserialize)]
struct ResponseEnvelope {
    version: u32,
    result: Result<Response, ControlError>,
}

/// Just the version of an envelope: other fields are ignored, so an envelope of another
/// version is recognised even when its contents would not parse.
#[derive(Deserialize)]
struct VersionProbe {
    version: u32,
}

fn check_version(body: &[u8]) -> Result<(), DecodeError> {
    let probe: VersionProbe =
        serde_json::from_slice(body).map_err(|e| DecodeError::Malformed(e.to_string()))?;
    if probe.version != PROTOCOL_VERSION {
        return Err(DecodeError::VersionMismatch { ours: PROTOCOL_VERSION, theirs: probe.version });
    }
    Ok(())
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Serializing these types cannot fail: every map key is a string and no type has a
    // custom Serialize that errors. An empty body would be rejected by the reader anyway.
    serde_json::to_vec(value).unwrap_or_default()
}

/// Reads until `buf` is full or the stream ends; returns the bytes read.
fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> Result<usize, FrameError> {
    let mut filled = 0;
    while filled < buf.len() {
        let Some(rest) = buf.get_mut(filled..) else { break };
        match reader.read(rest) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(io_error(error)),
        }
    }
    Ok(filled)
}

fn io_error(error: io::Error) -> FrameError {
    match error.kind() {
        // A socket read timeout reports WouldBlock on Unix.
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => FrameError::TimedOut,
        _ => FrameError::Io(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Ping;
    use proptest::prelude::*;

    fn frame(body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        write_frame(&mut out, body).unwrap();
        out
    }

    #[test]
    fn a_frame_is_a_little_endian_length_and_the_body() {
        assert_eq!(frame(b"{}"), b"\x02\x00\x00\x00{}");
        assert_eq!(read_frame(&mut &frame(b"{}")[..], 16).unwrap(), b"{}");
    }

    #[test]
    fn an_empty_stream_is_closed() {
        assert!(matches!(read_frame(&mut &b""[..], 16), Err(FrameError::Closed)));
    }

    #[test]
    fn a_short_header_is_truncated() {
        let error = read_frame(&mut &b"\x02\x00"[..], 16).unwrap_err();
        assert!(matches!(error, FrameError::Truncated { expected: 4, received: 2 }));
    }

    #[test]
    fn a_short_body_is_truncated() {
        let error = read_frame(&mut &b"\x05\x00\x00\x00abc"[..], 16).unwrap_err();
        assert!(matches!(error, FrameError::Truncated { expected: 9, received: 7 }));
    }

    #[test]
    fn an_oversized_length_is_refused_before_reading() {
        let error = read_frame(&mut &b"\xff\xff\xff\xffabc"[..], 1024).unwrap_err();
        assert!(matches!(error, FrameError::TooLarge { len: 0xffff_ffff, max: 1024 }));
    }

    #[test]
    fn garbage_is_malformed() {
        assert!(matches!(decode_request(b"GET / HTTP/1.1"), Err(DecodeError::Malformed(_))));
        assert!(matches!(decode_request(b"{\"version\":1}"), Err(DecodeError::Malformed(_))));
        let bad_command = br#"{"version":1,"request":{"command":"format_disk"}}"#;
        assert!(matches!(decode_request(bad_command), Err(DecodeError::Malformed(_))));
        assert!(matches!(decode_response(b"[1,2,3]"), Err(DecodeError::Malformed(_))));
    }

    #[test]
    fn another_version_is_recognised_whatever_its_contents() {
        let body = br#"{"version":7,"request":{"command":"from_the_future"}}"#;
        assert_eq!(
            decode_request(body),
            Err(DecodeError::VersionMismatch { ours: PROTOCOL_VERSION, theirs: 7 })
        );
        assert_eq!(
            decode_response(br#"{"version":0}"#),
            Err(DecodeError::VersionMismatch { ours: PROTOCOL_VERSION, theirs: 0 })
        );
    }

    #[test]
    fn the_request_encoding_is_readable_json() {
        let body = encode_request(&Request::NetShow { net: Some("tcp".into()), level: 2 });
        assert_eq!(
            String::from_utf8(body).unwrap(),
            r#"{"version":1,"request":{"command":"net_show","args":{"net":"tcp","level":2}}}"#
        );
        let body = encode_response(&Err(ControlError::NotConfigured));
        assert_eq!(
            String::from_utf8(body).unwrap(),
            r#"{"version":1,"result":{"Err":{"error":"not_configured"}}}"#
        );
    }

    proptest! {
        #[test]
        fn frames_round_trip(body in proptest::collection::vec(any::<u8>(), 0..512)) {
            let bytes = frame(&body);
            prop_assert_eq!(read_frame(&mut &bytes[..], 512).unwrap(), body);
        }

        #[test]
        fn any_bytes_decode_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = read_frame(&mut &bytes[..], 128).map(|body| decode_request(&body));
            let _ = decode_response(&bytes);
        }

        #[test]
        fn ping_requests_round_trip(
            nids in proptest::collection::vec("[0-9.@a-z]{1,20}", 0..8),
            timeout_ms in proptest::option::of(any::<u32>()),
            source in proptest::option::of("[0-9.@a-z]{1,20}"),
        ) {
            let request = Request::Ping(Ping { nids, timeout_ms, source });
            prop_assert_eq!(decode_request(&encode_request(&request)).unwrap(), request);
        }
    }
}
