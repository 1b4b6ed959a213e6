//! [`Secret`]: a secret value, zeroed on drop, never printed.

use std::fmt;

/// A secret value: zeroed on drop, never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(zeroize::Zeroizing<String>);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(zeroize::Zeroizing::new(value.into()))
    }

    /// The value. Keep it out of payloads, logs and errors.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}
