//! A batch's sled operations as journal records, and applying them (see
//! the parent module).

use crate::Trees;

/// A sled tree, as a journal record names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tree {
    Meta = 0,
    RunIds = 1,
    Runs = 2,
    Events = 3,
    ArtifactFiles = 4,
    ByTime = 5,
    ByTenant = 6,
    ByTool = 7,
    ByStatus = 8,
    /// Format 6.
    Summaries = 9,
}

impl Tree {
    fn from_byte(b: u8) -> Option<Tree> {
        Some(match b {
            0 => Tree::Meta,
            1 => Tree::RunIds,
            2 => Tree::Runs,
            3 => Tree::Events,
            4 => Tree::ArtifactFiles,
            5 => Tree::ByTime,
            6 => Tree::ByTenant,
            7 => Tree::ByTool,
            8 => Tree::ByStatus,
            9 => Tree::Summaries,
            _ => return None,
        })
    }

    fn of(self, t: &Trees) -> &sled::Tree {
        match self {
            Tree::Meta => &t.meta,
            Tree::RunIds => &t.run_ids,
            Tree::Runs => &t.runs,
            Tree::Events => &t.events,
            Tree::ArtifactFiles => &t.artifact_files,
            Tree::ByTime => &t.by_time,
            Tree::ByTenant => &t.by_tenant,
            Tree::ByTool => &t.by_tool,
            Tree::ByStatus => &t.by_status,
            Tree::Summaries => &t.summaries,
        }
    }
}

const INSERT: u8 = 1;
const REMOVE: u8 = 2;

/// A batch's sled operations, in order, each encoded as a journal record:
/// tree, kind (insert or remove), key length (u32 LE), key, value.
#[derive(Default)]
pub(crate) struct Ops {
    buf: Vec<u8>,
    /// Where each record ends in `buf`.
    ends: Vec<usize>,
}

impl Ops {
    pub(crate) fn insert(&mut self, tree: Tree, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.push(tree, INSERT, key.as_ref(), value.as_ref());
    }

    pub(crate) fn remove(&mut self, tree: Tree, key: impl AsRef<[u8]>) {
        self.push(tree, REMOVE, key.as_ref(), &[]);
    }

    fn push(&mut self, tree: Tree, kind: u8, key: &[u8], value: &[u8]) {
        self.buf.push(tree as u8);
        self.buf.push(kind);
        self.buf
            .extend_from_slice(&(key.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(key);
        self.buf.extend_from_slice(value);
        self.ends.push(self.buf.len());
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub(super) fn records(&self) -> Vec<&[u8]> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|&end| {
                let r = &self.buf[start..end];
                start = end;
                r
            })
            .collect()
    }
}

/// One decoded record: tree, key, and the value (`None`: a removal).
pub(super) type Op<'a> = (Tree, &'a [u8], Option<&'a [u8]>);

pub(super) fn decode(record: &[u8]) -> Option<Op<'_>> {
    let tree = Tree::from_byte(*record.first()?)?;
    let kind = *record.get(1)?;
    let len = u32::from_le_bytes(record.get(2..6)?.try_into().ok()?) as usize;
    let key = record.get(6..6usize.checked_add(len)?)?;
    let value = &record[6 + len..];
    match kind {
        INSERT => Some((tree, key, Some(value))),
        REMOVE if value.is_empty() => Some((tree, key, None)),
        _ => None,
    }
}

/// How many facts the blocks a batch inserts hold (a block's header
/// counts them: bytes 1..5, big-endian); records that do not parse count
/// nothing.
pub(crate) fn facts_in(records: &[Vec<u8>]) -> u64 {
    records
        .iter()
        .filter_map(|r| match decode(r)? {
            (Tree::Events, _, Some(value)) => Some(u64::from(u32::from_be_bytes(
                value.get(1..5)?.try_into().ok()?,
            ))),
            _ => None,
        })
        .sum()
}

/// Applies one batch's operations to sled's trees in their order, each
/// run of consecutive operations on one tree as one sled batch (atomic in
/// sled: a status swap never leaves neither entry, nor both). The order is
/// the one the writer used before the journal, which recovery relies on
/// for any prefix of it that sled alone may keep (a power cut that kept
/// sled's log pages and not the journal's).
pub(super) fn apply(trees: &Trees, records: &[&[u8]]) -> std::result::Result<(), ApplyError> {
    let mut order: Vec<(Tree, Vec<Op<'_>>)> = Vec::new();
    for record in records {
        let op = decode(record).ok_or(ApplyError::Malformed)?;
        match order.last_mut() {
            Some((t, ops)) if *t == op.0 => ops.push(op),
            _ => order.push((op.0, vec![op])),
        }
    }
    for (tree, ops) in order {
        let t = tree.of(trees);
        match ops.as_slice() {
            [(_, key, Some(value))] => {
                t.insert(key, *value)?;
            }
            [(_, key, None)] => {
                t.remove(key)?;
            }
            many => {
                let mut batch = sled::Batch::default();
                for (_, key, value) in many {
                    match value {
                        Some(v) => batch.insert(*key, *v),
                        None => batch.remove(*key),
                    }
                }
                t.apply_batch(batch)?;
            }
        }
    }
    Ok(())
}

pub(super) enum ApplyError {
    /// A record that is not an archive operation (an intact frame that
    /// no archive writer made).
    Malformed,
    Sled(sled::Error),
}

impl From<sled::Error> for ApplyError {
    fn from(e: sled::Error) -> ApplyError {
        ApplyError::Sled(e)
    }
}
