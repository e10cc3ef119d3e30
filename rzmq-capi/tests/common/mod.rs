//! What the C ABI's integration tests share.

/// A tool the test needs is absent: a skip on a developer's machine, a failure under CI=true
/// (setup installs it there, so its absence means the check silently did nothing).
pub(crate) fn missing_tool(why: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true and {why}"
    );
    eprintln!("SKIPPED: {why}");
}
