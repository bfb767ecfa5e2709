//! What the `api` and `tcp` test binaries share: the hang guard, payloads, receive and serve
//! buffers, and the PUT-and-GET round of every size. Each binary includes it by path.

use std::time::Duration;

use ulnet::*;

/// Generous bound on any single wait; only reached if something hangs.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// The payload sizes every transfer test covers.
pub const SIZES: [usize; 3] = [0, 4096, 1 << 20];

pub fn nid(text: &str) -> Nid {
    text.parse().expect("test NID")
}

/// Deterministic, position-dependent bytes, so a misplaced copy shows.
pub fn pattern(length: usize, seed: u8) -> Vec<u8> {
    (0..length).map(|index| (index as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

pub fn recv(queue: &EventQueue) -> Event {
    queue.recv_timeout(HANG_GUARD).expect("an event before the hang guard")
}

/// A receive buffer for one PUT (threshold 1, auto-unlink) of `length` bytes.
pub fn sink(length: usize) -> MdSpec {
    MdSpec::new(Memory::new(vec![0; length]))
        .options(MdOptions::OP_PUT)
        .threshold(Threshold::Count(1))
}

/// A buffer served to one GET (threshold 1, auto-unlink).
pub fn source(data: Vec<u8>) -> MdSpec {
    MdSpec::new(Memory::new(data)).options(MdOptions::OP_GET).threshold(Threshold::Count(1))
}

/// For each of [`SIZES`], a PUT with ACK from `a` to `b` (portal 10) and a GET of as many bytes
/// (portal 11), match bits the round's number, checking the bytes both ways and that `b`
/// ACKed. Returns `b`'s PUT and GET events of each round for the caller's checks.
pub fn put_and_get_every_size(a: &Node, b: &Node) -> Vec<(Event, Event)> {
    let inbox = b.event_queue(16);
    let mut events = Vec::new();
    for (round, size) in SIZES.into_iter().enumerate() {
        let bits = round as u64;
        let data = pattern(size, round as u8);
        b.post(10, bits, sink(size), &inbox).unwrap();
        let done = a
            .put_and_wait_ack(b.process_id(), 10, bits, Memory::new(data.clone()), HANG_GUARD)
            .unwrap();
        assert_eq!(done.event.mlength as usize, size);
        assert_eq!(done.event.source, b.process_id().nid, "the ACK comes from b");
        let put = recv(&inbox);
        assert_eq!(put.kind, EventKind::Put);
        assert_eq!(put.memory.as_ref().unwrap().to_vec(), data);

        let served = pattern(size, 100 + round as u8);
        b.post(11, bits, source(served.clone()), &inbox).unwrap();
        let reply = a.get_into(b.process_id(), 11, bits, vec![0; size], HANG_GUARD).unwrap();
        assert_eq!(reply, served);
        let get = recv(&inbox);
        assert_eq!(get.kind, EventKind::Get);
        events.push((put, get));
    }
    events
}
