//! # reel-nats: fact streams in a replicated NATS JetStream cluster
//!
//! reel's second storage backend: [`NatsStore`] implements the write
//! pipeline's [`Store`](reel_core::store::Store) over JetStream, for a fleet of
//! recorders on many hosts that must land their facts in one durable place
//! that survives the loss of a machine; [`sync`] projects the cluster's
//! stream back into a local sled [`Archive`](reel_archive::Archive), where
//! every reader of reel (`runs`, `show`, `diff`, `tail`, the HTML page, the
//! LSP, the replayer) works unchanged.
//!
//! What lives where (one JetStream domain, names from [`NatsConfig`]):
//!
//! | what | where | key |
//! |---|---|---|
//! | blocks of facts | stream `REEL`, R3 | subject `reel.<tenant>.run.<run id>`, or `reel.<tenant>.call.<key>` for a call outside any run |
//! | run claims and records | KV bucket `reel-runs`, R3 | `run.<run id>` / `call.<key>` |
//! | artifacts | object store bucket `reel-artifacts`, R3 | the sha-256 hex digest |
//!
//! Tokens are escaped for NATS subjects ([`subject_token`]); `_` stands for
//! a run without a tenant.
//!
//! Each message is one block in the archive's own format
//! ([`reel_archive::wire`]): version, count, previous digest, sha-256
//! digest, so the hash chain of a run runs through the stream exactly as it
//! runs through an archive.

#![warn(missing_docs)]

mod config;
mod error;
mod store;
mod subject;
mod sync;

pub use config::{NatsConfig, OfflinePolicy, NATS_ENV, OFFLINE_WAIT_ENV};
pub use error::NatsError;
pub use store::{subject_in_flight, NatsStore, StoreStats};
pub use subject::{stream_of_subject, subject_of, subject_token, token_of};
pub use sync::{follow, sync, verify_projection, Refused, SyncReport, VerifyProjection};
