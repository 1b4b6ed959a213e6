//! Helpers shared by this crate's test binaries (each includes it with
//! `mod common;`).

use std::path::Path;

/// Copies the directory `from` to `to`, recursively (an archive, say, to
/// damage the copy).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
