//! The `names!` macro: `as_str()` and `Display` for the record's enums.

/// `as_str()` (the name a fact records, its serde name) and `Display` (the
/// same name) for a fact enum, so that renderers print names, never
/// `format!("{:?}")`. `fact::tests::enum_names_are_serde_names` holds
/// every name to serde's.
macro_rules! names {
    ($ty:ident { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            /// The name the record uses for this value (its serde name).
            pub fn as_str(&self) -> &'static str {
                match self {
                    $($ty::$variant { .. } => $name,)+
                }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
