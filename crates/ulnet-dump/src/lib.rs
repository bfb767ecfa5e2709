//! The capture format `ulnet-dump` reads, as a library: classic pcap files of LNet-over-TCP
//! byte streams, read back as TCP segments and written with synthesized IPv4/IPv6 and TCP
//! framing (the embedded example capture and the tshark cross-check of the wire encoders).

pub mod pcap;
