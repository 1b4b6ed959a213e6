//! The `block` fuzz target's committed seeds (fuzz/seeds/block/: the demo
//! tapes' facts sealed as format 3 zstd blocks, and the format-2 blocks
//! kept beside them as `*-format2`; `regression-*` are inputs that once
//! broke the decoder), run in the normal test command: each demo block
//! decodes, both formats of a block give the same facts, a regression
//! input is refused, and no prefix or flipped byte of any seed panics the
//! decoder (bytes read from disk).

use std::path::Path;

use reel_archive::fuzzing::decode_block;

fn seeds() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/block");
    let mut seeds: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    seeds.sort();
    seeds
}

#[test]
fn every_block_seed_decodes_and_both_formats_agree() {
    let seeds = seeds();
    let versions: Vec<u8> = seeds.iter().map(|(_, b)| b[0]).collect();
    assert!(
        versions.contains(&2) && versions.contains(&3),
        "{versions:?}"
    );
    for (name, bytes) in &seeds {
        if name.starts_with("regression-") {
            assert!(decode_block(bytes).is_err(), "{name} is damage");
            continue;
        }
        let facts = decode_block(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!facts.is_empty(), "{name}");
        if let Some(base) = name.strip_suffix("-format2") {
            let (_, current) = seeds.iter().find(|(n, _)| n == base).unwrap();
            assert_eq!(current[0], 3, "{base} is format 3");
            assert_eq!(decode_block(current).unwrap(), facts, "{base}");
        }
    }
}

#[test]
fn no_prefix_or_flipped_byte_of_a_seed_panics() {
    for (name, bytes) in seeds() {
        if name.contains("-one") {
            continue;
        }
        for len in (0..bytes.len()).step_by(7) {
            let _ = decode_block(&bytes[..len]);
        }
        for i in (0..bytes.len()).step_by(3) {
            for bit in [0x01u8, 0x80] {
                let mut damaged = bytes.clone();
                damaged[i] ^= bit;
                // Damage is an error, or (a flip the checksum does not
                // cover, such as in padding) the same facts: never a panic.
                let _ = decode_block(&damaged);
            }
        }
    }
}
