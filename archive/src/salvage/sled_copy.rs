//! What sled itself still reads of a damaged store: a copy of it opened
//! by sled, every tree's values offered to the pool.

use std::path::Path;

use sha2::{Digest as _, Sha256};

use crate::keys;
use crate::record::decode_record;
use reel_core::codec::Digest;

use super::*;

/// Reads what sled can of a copy of the store into `pool`; returns what
/// sled said when it refused (or panicked), `None` when it opened.
pub(super) fn read_with_sled(from: &Path, pool: &mut Pool) -> Option<String> {
    let copy = std::env::temp_dir().join(format!(
        "reel-salvage-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    ));
    if let Err(e) = copy_dir(from, &copy) {
        let _ = std::fs::remove_dir_all(&copy);
        return Some(format!("the store could not be copied to be opened: {e}"));
    }
    // sled 0.34 may panic on some damage instead of returning an error:
    // that is a refusal like any other.
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut found = Pool::default();
        let refused = sled_into(&copy, &mut found);
        (refused, found)
    }));
    let _ = std::fs::remove_dir_all(&copy);
    match read {
        Ok((refused, found)) => {
            for (digest, block) in found.blocks {
                pool.blocks.entry(digest).or_insert(block);
            }
            pool.artifacts.extend(found.artifacts);
            pool.records.extend(found.records);
            pool.record_facts.extend(found.record_facts);
            pool.stored_control = found.stored_control;
            pool.format = found.format;
            pool.pruned = found.pruned;
            refused
        }
        Err(_) => Some("sled panicked while reading the store".into()),
    }
}

fn sled_into(dir: &Path, pool: &mut Pool) -> Option<String> {
    let db = match sled::Config::new().path(dir).flush_every_ms(None).open() {
        Ok(db) => db,
        Err(e) => return Some(e.to_string()),
    };
    let mut refused = None;
    let mut note = |e: sled::Error| {
        refused.get_or_insert_with(|| format!("sled opened the store but failed reading it: {e}"));
    };
    if let Ok(Some(v)) = db
        .open_tree(keys::T_META)
        .and_then(|m| m.get(keys::META_FORMAT))
    {
        pool.format = keys::format_from(&v);
    }
    if let Ok(Some(v)) = db
        .open_tree(keys::T_META)
        .and_then(|m| m.get(keys::META_CONTROL))
    {
        pool.stored_control = crate::control::Control::from_meta(&v);
    }
    if let Ok(pruned) = db.open_tree(keys::T_PRUNED) {
        for (_, v) in pruned.iter().flatten() {
            if let Some((_, _, _, run_id)) = keys::tombstone_from(&v) {
                pool.pruned.insert(run_id);
            }
        }
    }
    match db.open_tree(keys::T_RUNS) {
        Ok(runs) => {
            for item in runs.iter() {
                match item {
                    Ok((k, v)) => {
                        if let (Some(o), Ok(r)) = (keys::ordinal_from(&k), decode_record(&v)) {
                            pool.record_facts.insert(r.run_id.clone(), r.facts);
                            pool.records.insert(o, r.run_id);
                        }
                    }
                    Err(e) => {
                        note(e);
                        break;
                    }
                }
            }
        }
        Err(e) => note(e),
    }
    match db.open_tree(keys::T_EVENTS) {
        Ok(events) => {
            for item in events.iter() {
                match item {
                    Ok((k, v)) => {
                        let ordinal = keys::split_event_key(&k).map(|(o, _)| o);
                        pool.offer(&v, ordinal);
                    }
                    Err(e) => {
                        note(e);
                        break;
                    }
                }
            }
        }
        Err(e) => note(e),
    }
    match db.open_tree(keys::T_ARTIFACTS) {
        Ok(artifacts) => {
            for item in artifacts.iter() {
                match item {
                    Ok((k, v)) => {
                        let digest: Digest = Sha256::digest(&v).into();
                        if digest[..] == k[..] {
                            pool.artifacts.insert(digest, v.to_vec());
                        }
                    }
                    Err(e) => {
                        note(e);
                        break;
                    }
                }
            }
        }
        Err(e) => note(e),
    }
    refused
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}
