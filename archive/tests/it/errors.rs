//! Errors say what went wrong, filed under their own variant: a listing
//! cursor this archive did not hand out is named as such (not as invalid
//! facts of a run with an empty id).

use reel_archive::{Archive, ArchiveConfig, ArchiveError, Cursor, FingerprintKey, RunFilter};

#[test]
fn a_bad_cursor_is_its_own_error_naming_the_cursor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = Archive::open(
        dir.path(),
        ArchiveConfig {
            fingerprint_key: FingerprintKey::Key([1; 32]),
            ..ArchiveConfig::default()
        },
    )
    .expect("open");
    let err = archive
        .list_runs(&RunFilter {
            cursor: Some(Cursor("not-a-cursor".into())),
            ..RunFilter::default()
        })
        .expect_err("refused");
    match &err {
        ArchiveError::BadCursor { cursor } => assert_eq!(cursor, "not-a-cursor"),
        other => panic!("not BadCursor: {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "cursor \"not-a-cursor\" is not one reel handed out: pass the `next` cursor of a previous page"
    );
}
