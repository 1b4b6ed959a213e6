//! Reading an archive a recorder holds, through the recorder's live socket:
//! the one client, [`reel_archive::live::Client`], which the `reel`
//! binary's `source.rs` asks through too.

pub(crate) use reel_archive::live::{Asked, Client as Live, Item};
