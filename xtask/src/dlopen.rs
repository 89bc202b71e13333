//! The dlopen linkage checks of `cargo xtask test`.
