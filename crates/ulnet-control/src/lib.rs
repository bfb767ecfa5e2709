//! The control plane between `ulnetctl` and `ulnetd` (design principle 8: configuration and
//! queries go through a local socket, never through the data path).
//!
//! - [`message`]: [`Request`] (one per lnetctl command that reaches the node), [`Response`]
//!   and [`ControlError`] (every error has the negative errno and description lnetctl's
//!   reports print).
//! - [`data`]: the plain data responses carry, serde mirrors of the input structs of
//!   `ulnet_config::render` with NIDs as text, and the conversions both ways.
//! - [`frame`]: length-prefixed JSON frames with a protocol version and size bounds.
//! - [`client`]: [`Client`], blocking, with timeouts.
//! - [`server`]: [`Handler`] (what the daemon implements), [`Server`] and [`serve`] on std
//!   threads, [`listen`] to bind the socket safely.
//! - [`path`]: where the socket is (`--socket`, `$ULNET_SOCKET`, `/run` or
//!   `$XDG_RUNTIME_DIR`).
//!
//! ```no_run
//! use ulnet_control::{Client, Request, Response};
//!
//! let (path, _) = ulnet_control::path::socket_path(None);
//! let mut client = Client::connect(&path)?;
//! if let Response::Nets(nets) = client.call(&Request::NetShow { net: None, level: 0 })? {
//!     println!("{} nets", nets.len());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod client;
pub mod data;
pub mod frame;
pub mod message;
pub mod path;
pub mod server;

pub use client::{CallError, Client, ConnectError};
pub use frame::{MAX_REQUEST_LEN, MAX_RESPONSE_LEN, PROTOCOL_VERSION};
pub use message::{ControlError, Request, Response};
pub use server::{Handler, ListenError, Server, listen, serve};
