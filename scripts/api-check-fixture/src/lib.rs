//! The fixture of scripts/api-check-test.sh: each test edits one marked line.

/// Kept by every test.
pub fn kept(x: u32) -> u32 {
    x
}

/// Removed by one test.
pub fn removable() {} // MARK-REMOVE

/// An exhaustive enum: adding a variant breaks matches.
pub enum Shape {
    /// A variant.
    Round,
    // MARK-VARIANT
}

/// A struct with a private field, and its methods.
pub struct Thing {
    /// A public field.
    pub size: usize,
    _private: (),
}

impl Thing {
    /// A method.
    pub fn new(size: usize) -> Thing {
        Thing { size, _private: () }
    }
}

/// A module of its own.
pub mod inner {
    /// A constant.
    pub const LIMIT: u64 = 4;
}

// MARK-ADD
