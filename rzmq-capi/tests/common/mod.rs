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

/// zeromq-src 0.3's `vendor/` (libzmq 4.3.5's sources) from `cargo metadata`, or None when the
/// crate is not in the registry.
#[allow(dead_code)]
pub(crate) fn zeromq_vendor() -> Option<std::path::PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "manifest_path":".../zeromq-src-0.3.x/Cargo.toml", found without a JSON parser.
    let key = "\"manifest_path\":\"";
    let manifest = text.match_indices(key).find_map(|(i, _)| {
        let rest = &text[i + key.len()..];
        let path = &rest[..rest.find('"')?];
        (path.contains("/zeromq-src-0.3") && path.ends_with("/Cargo.toml")).then_some(path)
    })?;
    Some(std::path::Path::new(manifest).parent()?.join("vendor"))
}

/// The `ZMQ_BUILD_DRAFT_API` section of a `zmq.h` (empty when it has none).
#[allow(dead_code)]
pub(crate) fn draft_section(h: &str) -> &str {
    let Some(start) = h.find("#ifdef ZMQ_BUILD_DRAFT_API") else {
        return "";
    };
    let end = h[start..]
        .find("#endif // ZMQ_BUILD_DRAFT_API")
        .or_else(|| h[start..].find("#endif /* ZMQ_BUILD_DRAFT_API */"))
        .map_or(h.len(), |e| start + e);
    &h[start..end]
}
