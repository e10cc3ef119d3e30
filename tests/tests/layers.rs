//! The layering rule, checked: docs/ARCHITECTURE.md states, for a source folder, the order of its
//! modules from the bottom up (a fenced block after an `<!-- import-order: DIR -->` marker, one
//! level a line); a module may use modules on lower lines only, never one on its own line (peers
//! are independent) or above. This test reads every `.rs` file under each such folder, resolves
//! the `crate::` / `super::` paths its non-test code names (in `use` items and inline), and fails
//! on every reference that points up or sideways, and on any module the order does not place.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// One `import-order` block of the architecture document.
struct Order {
    /// The folder, relative to the workspace root (e.g. `rzmq-core/src`).
    dir: String,
    /// The folder's crate-relative module path (`[]` for a crate's `src`, `["zmtp"]` below it).
    base: Vec<String>,
    /// Unit name -> level (line index, bottom = 0).
    level: BTreeMap<String, usize>,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn read_orders(doc: &str) -> Vec<Order> {
    let mut orders = Vec::new();
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.trim().strip_prefix("<!-- import-order:") else {
            continue;
        };
        let dir = rest.trim_end_matches("-->").trim().to_string();
        let fence = lines.next().unwrap_or_default();
        assert!(
            fence.starts_with("```"),
            "import-order {dir}: a fenced block must follow"
        );
        let mut level = BTreeMap::new();
        let mut n = 0;
        for l in lines.by_ref() {
            if l.starts_with("```") {
                break;
            }
            // Text after `#` on a line is a comment.
            let l = l.split('#').next().unwrap_or_default();
            let units: Vec<&str> = l.split_whitespace().collect();
            if units.is_empty() {
                continue;
            }
            for u in units {
                let prev = level.insert(u.to_string(), n);
                assert!(prev.is_none(), "import-order {dir}: {u} is placed twice");
            }
            n += 1;
        }
        let src = dir.find("/src").map(|i| &dir[i + 4..]).unwrap_or_default();
        let base = src
            .split('/')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        orders.push(Order { dir, base, level });
    }
    orders
}

/// The crate-relative module path of a file (`src/zmtp/mod.rs` -> `[zmtp]`).
fn module_path(crate_src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(crate_src).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" && stem != "main" {
        parts.push(stem.to_string());
    }
    parts
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The file's code without comments, string contents and `#[cfg(test)]` items.
fn production_code(text: &str) -> String {
    let mut out = String::new();
    let mut skip_depth: Option<i32> = None;
    let mut depth = 0i32;
    let mut pending_test = false;
    for raw in text.lines() {
        let line = strip_comment_and_strings(raw);
        let t = line.trim();
        if skip_depth.is_none() && t.starts_with("#[cfg(test)]") {
            pending_test = true;
            continue;
        }
        let opens = line.matches('{').count() as i32;
        let closes = line.matches('}').count() as i32;
        if pending_test && !t.is_empty() && !t.starts_with("#[") {
            pending_test = false;
            if opens > closes {
                skip_depth = Some(depth);
            } else {
                // A one-line item (`mod tests;`, `use ...;`): skipped.
                depth += opens - closes;
                continue;
            }
        }
        depth += opens - closes;
        if let Some(d) = skip_depth {
            if depth <= d {
                skip_depth = None;
            }
            continue;
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn strip_comment_and_strings(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    let mut in_str = false;
    while let Some(c) = chars.next() {
        if in_str {
            if c == '\\' {
                chars.next();
            } else if c == '"' {
                in_str = false;
                out.push('"');
            }
            continue;
        }
        match c {
            '"' => {
                in_str = true;
                out.push('"');
            }
            '/' if chars.peek() == Some(&'/') => break,
            '\'' => {
                // A char literal ('{', '\'') or a lifetime ('a): skip a literal whole.
                let rest: String = chars.clone().take(3).collect();
                if rest.starts_with('\\') {
                    let n = rest.find('\'').map_or(0, |i| i + 1);
                    for _ in 0..n.max(2) {
                        chars.next();
                    }
                } else if rest.chars().nth(1) == Some('\'') {
                    chars.next();
                    chars.next();
                } else {
                    out.push(c);
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// Every module path the code names through `crate::` or `super::`, resolved from `here` (the
/// file's module path), including the members of grouped `use` items.
fn references(code: &str, here: &[String]) -> BTreeSet<Vec<String>> {
    let mut refs = BTreeSet::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &code[i..];
        let start_ok = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        let prefix = if !start_ok {
            None
        } else if rest.starts_with("crate::") && !code[..i].ends_with('$') {
            Some(("crate::".len(), Vec::new()))
        } else if rest.starts_with("super::") {
            let mut base = here.to_vec();
            let mut n = 0;
            while code[i + n..].starts_with("super::") {
                base.pop();
                n += "super::".len();
            }
            Some((n, base))
        } else {
            None
        };
        let Some((skip, base)) = prefix else {
            i += 1;
            continue;
        };
        let (paths, used) = parse_tree(&code[i + skip..]);
        for p in paths {
            let mut full = base.clone();
            full.extend(p);
            refs.insert(full);
        }
        i += skip + used.max(1);
    }
    refs
}

/// Parses a path or a use tree (`a::b`, `a::{b, c::d}`) at the start of `s`: the paths, and how
/// many bytes they took.
fn parse_tree(s: &str) -> (Vec<Vec<String>>, usize) {
    let b = s.as_bytes();
    let mut i = 0;
    let mut prefix = Vec::new();
    loop {
        let st = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        if i > st {
            prefix.push(s[st..i].to_string());
        }
        let group = if s[i..].starts_with("::{") {
            Some(3)
        } else if prefix.is_empty() && s[i..].starts_with('{') {
            Some(1)
        } else {
            None
        };
        if let Some(open) = group {
            i += open;
            let mut out = Vec::new();
            loop {
                while i < b.len() && (b[i] == b' ' || b[i] == b'\n' || b[i] == b',') {
                    i += 1;
                }
                if i >= b.len() || b[i] == b'}' {
                    i += 1;
                    break;
                }
                let (sub, used) = parse_tree(&s[i..]);
                for p in sub {
                    let mut full = prefix.clone();
                    full.extend(p);
                    out.push(full);
                }
                i += used.max(1);
                // Skip `as alias`.
                while i < b.len() && b[i] != b',' && b[i] != b'}' {
                    i += 1;
                }
            }
            return (out, i);
        }
        if s[i..].starts_with("::") && i > st {
            i += 2;
            continue;
        }
        return (vec![prefix], i);
    }
}

/// The unit of `path` inside the folder whose module path is `base`, if it lies inside.
fn unit_of(base: &[String], path: &[String]) -> Option<String> {
    if path.len() > base.len() && path[..base.len()] == *base {
        Some(path[base.len()].clone())
    } else {
        None
    }
}

#[test]
fn modules_import_only_lower_layers() {
    let root = workspace_root();
    let doc = fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    let orders = read_orders(&doc);
    assert!(
        !orders.is_empty(),
        "docs/ARCHITECTURE.md states no import-order block"
    );
    let mut problems = Vec::new();
    for order in &orders {
        let dir = root.join(&order.dir);
        let crate_src = {
            let s = order.dir.find("/src").map(|i| &order.dir[..i + 4]).unwrap();
            root.join(s)
        };
        let mut files = Vec::new();
        rs_files(&dir, &mut files);
        files.sort();
        // Modules declared under #[cfg(test)] (`#[cfg(test)] mod tests;`): their files are tests.
        let mut test_mods = BTreeSet::new();
        for f in &files {
            let text = fs::read_to_string(f).unwrap();
            let mut prev_cfg_test = false;
            for l in text.lines() {
                let t = l.trim();
                if prev_cfg_test {
                    if let Some(m) = t
                        .strip_prefix("mod ")
                        .or_else(|| t.strip_prefix("pub mod "))
                    {
                        let name = m.trim_end_matches(';').trim();
                        let mut p = module_path(&crate_src, f);
                        p.push(name.to_string());
                        test_mods.insert(p);
                    }
                }
                prev_cfg_test =
                    t.starts_with("#[cfg(test)]") || (prev_cfg_test && t.starts_with("#["));
            }
        }
        let mut seen_units = BTreeSet::new();
        for f in &files {
            let here = module_path(&crate_src, f);
            if test_mods.iter().any(|t| here.starts_with(t)) {
                continue;
            }
            let Some(unit) = unit_of(&order.base, &here).or_else(|| {
                // The folder's own mod.rs / lib.rs.
                (here == order.base).then(|| "mod".to_string())
            }) else {
                continue;
            };
            let unit = if here == order.base && order.base.is_empty() {
                "lib".to_string()
            } else {
                unit
            };
            if unit == "mod" && !order.level.contains_key("mod") {
                // A folder's mod.rs holds what its files extend; placed only where it is stated.
                continue;
            }
            seen_units.insert(unit.clone());
            let Some(&mine) = order.level.get(&unit) else {
                problems.push(format!(
                    "{}: module `{unit}` is not placed in the order",
                    order.dir
                ));
                continue;
            };
            let code = production_code(&fs::read_to_string(f).unwrap());
            for r in references(&code, &here) {
                let Some(other) = unit_of(&order.base, &r) else {
                    continue;
                };
                if other == unit {
                    continue;
                }
                let Some(&theirs) = order.level.get(&other) else {
                    // A name defined in the folder's mod.rs / lib.rs itself (a re-export, a
                    // macro, an item) rather than a module: the mod/lib unit.
                    if order.level.contains_key("mod") || order.level.contains_key("lib") {
                        continue;
                    }
                    continue;
                };
                if theirs >= mine {
                    problems.push(format!(
                        "{}: `{}` ({}) uses `{}` ({}), which is {}",
                        order.dir,
                        f.strip_prefix(&root).unwrap().display(),
                        unit,
                        r.join("::"),
                        other,
                        if theirs == mine {
                            "on its own level"
                        } else {
                            "above it"
                        }
                    ));
                }
            }
        }
        for u in order.level.keys() {
            if !seen_units.contains(u) && u != "mod" && u != "lib" {
                problems.push(format!(
                    "{}: the order places `{u}`, which has no file",
                    order.dir
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "layering violations:\n{}",
        problems.join("\n")
    );
}

#[test]
fn reference_parsing() {
    let here = vec!["zmtp".to_string(), "curve".to_string()];
    let refs = references(
        "use crate::{msg::Msg, zmtp::{codec::X, frame}};\nlet a = super::error::E;\n",
        &here,
    );
    let want: BTreeSet<Vec<String>> = [
        vec!["msg", "Msg"],
        vec!["zmtp", "codec", "X"],
        vec!["zmtp", "frame"],
        vec!["zmtp", "error", "E"],
    ]
    .iter()
    .map(|v| v.iter().map(|s| s.to_string()).collect())
    .collect();
    assert_eq!(refs, want);
    let code = production_code("use crate::a;\n#[cfg(test)]\nmod tests {\n    use crate::b;\n}\nuse crate::c; // crate::d\n");
    let refs = references(&code, &[]);
    assert!(refs.contains(&vec!["a".to_string()]));
    assert!(refs.contains(&vec!["c".to_string()]));
    assert!(!refs.iter().any(|r| r[0] == "b" || r[0] == "d"));
}
