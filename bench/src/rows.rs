//! The rows of the suite, one module per row or group of rows sharing
//! their measurements; [`crate::run`] calls each that the options ask for.

pub(crate) mod agent;
pub(crate) mod compression;
pub(crate) mod console;
pub(crate) mod latency;
pub(crate) mod list;
pub(crate) mod mcp;
pub(crate) mod memory;
pub(crate) mod nats;
pub(crate) mod progress;
pub(crate) mod recording;
pub(crate) mod replay;
pub(crate) mod tripwire;
pub(crate) mod viewer;
