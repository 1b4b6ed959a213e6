//! The key of credential fingerprints, kept outside the archive.
//!
//! A fingerprint is HMAC-SHA256 of a credential under this key. Whoever has
//! the key and a copy of an archive can test guesses against its
//! fingerprints (a 6-digit PIN falls in under a second), so the key never
//! lives in the archive directory: the host provides it, or it is read from
//! (and on first use created in) an owner-only key file in the user's
//! configuration directory. See [`FingerprintKey`].

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use hmac::{Hmac, Mac};
use reel_core::fact::Fingerprint;
use sha2::Sha256;

use zeroize::Zeroizing;

/// The environment variable that provides the key (64 hex digits) when the
/// source is [`FingerprintKey::User`].
pub const KEY_ENV: &str = "REEL_FINGERPRINT_KEY";

/// The environment variable naming the directory that holds the user's key
/// file, instead of `$XDG_CONFIG_HOME/reel` or `~/.config/reel`.
pub const CONFIG_DIR_ENV: &str = "REEL_CONFIG_DIR";

/// The name of the key file in the user's configuration directory.
pub const KEY_FILE: &str = "fingerprint.key";

/// Where the key of credential fingerprints comes from. It never comes from,
/// nor goes into, the archive directory. Hosts that must compare
/// fingerprints across machines give every machine the same key.
#[derive(Clone, Default)]
pub enum FingerprintKey {
    /// [`KEY_ENV`] when set (64 hex digits), else the user's key file:
    /// [`KEY_FILE`] in [`CONFIG_DIR_ENV`], `$XDG_CONFIG_HOME/reel` or
    /// `~/.config/reel`, created on first use (owner-only, mode 0600, in a
    /// 0700 directory), read afterwards.
    #[default]
    User,
    /// A key the host provides (from its secret store, say).
    Key([u8; 32]),
    /// The key file at this path, created like the user's on first use.
    File(PathBuf),
}

impl fmt::Debug for FingerprintKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FingerprintKey::User => f.write_str("User"),
            FingerprintKey::Key(_) => f.write_str("Key(***)"),
            FingerprintKey::File(p) => f.debug_tuple("File").field(p).finish(),
        }
    }
}

impl FingerprintKey {
    /// A key from 64 hex digits (the form of a key file and of
    /// [`KEY_ENV`]); surrounding white space is ignored.
    pub fn from_hex(text: &str) -> Result<FingerprintKey, String> {
        parse_hex(text).map(|k| FingerprintKey::Key(*k))
    }
}

fn parse_hex(text: &str) -> Result<Zeroizing<[u8; 32]>, String> {
    let text = text.trim();
    let mut key = Zeroizing::new([0u8; 32]);
    match hex::decode_to_slice(text, &mut key[..]) {
        Ok(()) => Ok(key),
        Err(_) => Err(format!(
            "a fingerprint key is 64 hex digits (32 bytes), not {} characters{}",
            text.chars().count(),
            if text.chars().all(|c| c.is_ascii_hexdigit()) {
                ""
            } else {
                " with non-hex ones"
            }
        )),
    }
}

/// The fingerprint key in use: where it comes from (decided when it is
/// made, without touching the file system) and the key once it was first
/// needed. Cheap to clone: clones share one key. The archive keeps one
/// ([`crate::Archive::keyring`]); a recorder over a store that is not the
/// archive makes its own from its configuration.
#[derive(Clone)]
pub struct Keyring(Arc<KeySlot>);

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Keyring(..)")
    }
}

impl Keyring {
    /// Decides where the key comes from. Fails only on a malformed
    /// [`KEY_ENV`] (the message says what to do).
    pub fn new(config: &FingerprintKey) -> Result<Keyring, String> {
        KeySlot::new(config).map(|slot| Keyring(Arc::new(slot)))
    }

    /// A keyed MAC (HMAC-SHA256, all 32 bytes) of `data` for `purpose`,
    /// under a key derived from the fingerprint key for that purpose
    /// alone. A MAC for one purpose says nothing of another's, nor of any
    /// [`Keyring::fingerprint`].
    pub fn keyed_mac(&self, purpose: &str, data: &[u8]) -> [u8; 32] {
        let mut derive = <Hmac<Sha256> as Mac>::new_from_slice(&self.0.key()[..])
            .expect("HMAC takes any key size");
        // NUL-framed, so that no secret a credential fingerprints (text)
        // names the derived key.
        derive.update(b"\0reel keyed mac\0");
        derive.update(purpose.as_bytes());
        derive.update(b"\0");
        let subkey = derive.finalize().into_bytes();
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&subkey).expect("HMAC takes any key size");
        mac.update(data);
        mac.finalize().into_bytes().into()
    }

    /// The keyed fingerprint of a secret (HMAC-SHA256, first 16 bytes,
    /// hex). The key is read (or created) on the first call.
    pub fn fingerprint(&self, secret: &[u8]) -> Fingerprint {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0.key()[..])
            .expect("HMAC takes any key size");
        mac.update(secret);
        let out = mac.finalize().into_bytes();
        Fingerprint(format!("hmac-sha256:{}", hex::encode(&out[..16])))
    }
}

/// Where a key will come from, decided when the archive opens (without
/// touching the file system), and the key once it was first needed.
pub(crate) struct KeySlot {
    source: Source,
    key: OnceLock<Zeroizing<[u8; 32]>>,
}

enum Source {
    Ready,
    File(PathBuf),
    /// No place for a key file; the message says why and what to do.
    Nowhere(String),
}

impl KeySlot {
    /// Decides the key's source. Fails only on a malformed [`KEY_ENV`].
    pub(crate) fn new(config: &FingerprintKey) -> Result<KeySlot, String> {
        let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        KeySlot::with_env(config, env)
    }

    fn with_env(
        config: &FingerprintKey,
        env: impl Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Result<KeySlot, String> {
        let slot = |source| KeySlot {
            source,
            key: OnceLock::new(),
        };
        Ok(match config {
            FingerprintKey::Key(k) => {
                let s = slot(Source::Ready);
                let _ = s.key.set(Zeroizing::new(*k));
                s
            }
            FingerprintKey::File(path) => slot(Source::File(path.clone())),
            FingerprintKey::User => {
                if let Some(v) = env(KEY_ENV) {
                    let key = v
                        .to_str()
                        .ok_or_else(|| "it is not UTF-8".to_owned())
                        .and_then(parse_hex)
                        .map_err(|e| {
                            format!("{KEY_ENV} is not a fingerprint key: {e}; fix it or unset it")
                        })?;
                    let s = slot(Source::Ready);
                    let _ = s.key.set(key);
                    return Ok(s);
                }
                match user_key_file(env) {
                    Some(path) => slot(Source::File(path)),
                    None => slot(Source::Nowhere(format!(
                        "no place for the fingerprint key file: neither {CONFIG_DIR_ENV}, \
                         XDG_CONFIG_HOME nor HOME is set; set {KEY_ENV} (64 hex digits) or \
                         {CONFIG_DIR_ENV}"
                    ))),
                }
            }
        })
    }

    /// The key: read or created on first use. When that fails, a key of
    /// this process's own, said once as a `tracing` warning: fingerprints then
    /// compare only within this process, and nothing is stored.
    pub(crate) fn key(&self) -> &[u8; 32] {
        self.key.get_or_init(|| {
            let found = match &self.source {
                Source::Ready => unreachable!("a ready key is set when the slot is made"),
                Source::File(path) => load_or_create(path),
                Source::Nowhere(why) => Err(why.clone()),
            };
            found.unwrap_or_else(|why| {
                tracing::warn!(
                    "reel: {why}. Credential fingerprints of this process use a key of its own \
                     and compare only with each other."
                );
                Zeroizing::new(rand::random())
            })
        })
    }
}

/// `fingerprint.key` in the user's configuration directory.
fn user_key_file(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    if let Some(dir) = env(CONFIG_DIR_ENV) {
        return Some(PathBuf::from(dir).join(KEY_FILE));
    }
    // The XDG base directory spec ignores a relative XDG_CONFIG_HOME.
    let config = env("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(config.join("reel").join(KEY_FILE))
}

/// Reads the key file at `path`, or creates it with a new random key.
/// Creation is atomic: the key is written whole to a temporary file
/// (owner-only) and hard-linked into place, so a concurrent creator either
/// wins or reads the winner's key, and nobody reads half a key.
pub(crate) fn load_or_create(path: &Path) -> Result<Zeroizing<[u8; 32]>, String> {
    match read_key(path) {
        Ok(Some(key)) => return Ok(key),
        Ok(None) => {}
        Err(e) => return Err(e),
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let dir = dir.unwrap_or(Path::new("."));
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(|e| {
        format!(
            "the fingerprint key's directory {} cannot be created: {e}",
            dir.display()
        )
    })?;
    let key = Zeroizing::new(rand::random::<[u8; 32]>());
    let text = Zeroizing::new(format!("{}\n", hex::encode(&key[..])));
    let tmp = dir.join(format!(
        ".{KEY_FILE}.{}.{:016x}",
        std::process::id(),
        rand::random::<u64>()
    ));
    let written = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::hard_link(&tmp, path)
    })();
    let _ = std::fs::remove_file(&tmp);
    match written {
        Ok(()) => Ok(key),
        // Another process made it first: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_key(path)?
            .ok_or_else(|| format!("the fingerprint key file {} vanished", path.display())),
        Err(e) => Err(format!(
            "the fingerprint key file {} cannot be created: {e}",
            path.display()
        )),
    }
}

/// The key in the file at `path`; `None` when there is no file.
fn read_key(path: &Path) -> Result<Option<Zeroizing<[u8; 32]>>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => Zeroizing::new(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(format!(
                "the fingerprint key file {} cannot be read: {e}",
                path.display()
            ))
        }
    };
    let key = parse_hex(&text).map_err(|e| {
        format!(
            "the fingerprint key file {} is damaged ({e}): restore it, or delete it to start \
             a new key (fingerprints made with the old one will not match new ones)",
            path.display()
        )
    })?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        if let Ok(meta) = std::fs::metadata(path) {
            if meta.permissions().mode() & 0o077 != 0 {
                tracing::warn!(
                    "reel: the fingerprint key file {} can be read by other users: \
                     `chmod 600` it",
                    path.display()
                );
            }
        }
    }
    Ok(Some(key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::ffi::OsString;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        move |k| vars.get(k).cloned()
    }

    fn file_of(slot: &KeySlot) -> Option<&Path> {
        match &slot.source {
            Source::File(p) => Some(p),
            _ => None,
        }
    }

    #[test]
    fn the_user_key_is_looked_for_in_this_order() {
        let user = FingerprintKey::User;
        let key = "ab".repeat(32);
        let s = KeySlot::with_env(&user, env(&[(KEY_ENV, &key), ("HOME", "/h")])).unwrap();
        assert_eq!(s.key(), &[0xab; 32], "the environment's key first");
        for (vars, want) in [
            (
                vec![
                    (CONFIG_DIR_ENV, "/c"),
                    ("XDG_CONFIG_HOME", "/x"),
                    ("HOME", "/h"),
                ],
                "/c/fingerprint.key",
            ),
            (
                vec![("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")],
                "/x/reel/fingerprint.key",
            ),
            (
                vec![("XDG_CONFIG_HOME", "relative"), ("HOME", "/h")],
                "/h/.config/reel/fingerprint.key",
            ),
            (vec![("HOME", "/h")], "/h/.config/reel/fingerprint.key"),
        ] {
            let s = KeySlot::with_env(&user, env(&vars)).unwrap();
            assert_eq!(file_of(&s), Some(Path::new(want)), "{vars:?}");
        }
        let s = KeySlot::with_env(&user, env(&[])).unwrap();
        assert!(matches!(&s.source, Source::Nowhere(why) if why.contains(KEY_ENV)));
    }

    #[test]
    fn a_malformed_environment_key_is_an_error_that_names_it() {
        for bad in ["abc", &"zz".repeat(32), &"ab".repeat(33)] {
            let err = KeySlot::with_env(&FingerprintKey::User, env(&[(KEY_ENV, bad)]))
                .err()
                .expect("malformed");
            assert!(
                err.contains(KEY_ENV) && err.contains("64 hex digits"),
                "{err}"
            );
        }
    }

    #[test]
    fn the_key_file_is_created_owner_only_once_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new/sub").join(KEY_FILE);
        let first = load_or_create(&path).unwrap();
        let second = load_or_create(&path).unwrap();
        assert_eq!(*first, *second);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("{}\n", hex::encode(&first[..])));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
            let mode = std::fs::metadata(path.parent().unwrap())
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o700);
        }
        // No temporary file is left beside it.
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [KEY_FILE]);
    }

    /// Creators racing for the same file all end up with one key.
    #[test]
    fn concurrent_creators_agree_on_one_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEY_FILE);
        let keys: Vec<[u8; 32]> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| *load_or_create(&path).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(keys.windows(2).all(|w| w[0] == w[1]), "{keys:?}");
    }

    #[test]
    fn a_damaged_key_file_is_an_error_that_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEY_FILE);
        std::fs::write(&path, "not a key\n").unwrap();
        let err = load_or_create(&path).expect_err("damaged");
        assert!(
            err.contains(&path.display().to_string()) && err.contains("delete it"),
            "{err}"
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "not a key\n",
            "left as it was"
        );
    }
}
