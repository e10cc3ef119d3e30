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
        if skip_depth.is_none() && is_test_cfg(t) {
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

/// A `#[cfg(..)]` that compiles the item only in tests (`test`, or `all(test, ..)`).
fn is_test_cfg(attr: &str) -> bool {
    attr.starts_with("#[cfg(test)]") || attr.starts_with("#[cfg(all(test,")
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
    let scopes = inline_modules(code);
    let mut i = 0;
    while i < bytes.len() {
        let rest = &code[i..];
        let start_ok = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        let prefix = if !start_ok {
            None
        } else if rest.starts_with("crate::") && !code[..i].ends_with('$') {
            Some(("crate::".len(), Vec::new()))
        } else if rest.starts_with("super::") {
            // `super` counts from the inline module (`mod imp { .. }`) the path sits in.
            let at = scopes.partition_point(|(o, _)| *o <= i);
            let mut base = here.to_vec();
            if at > 0 {
                if scopes[at - 1].1.iter().any(|m| m == MACRO_BODY) {
                    i += "super::".len();
                    continue;
                }
                base.extend(scopes[at - 1].1.iter().cloned());
            }
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

/// The scope name [`inline_modules`] gives a `macro_rules!` body.
const MACRO_BODY: &str = "$macro_rules";

/// The inline modules (`mod name { .. }`) of a file's code: from each offset where the nesting
/// changes, the names of the modules open there, outermost first.
fn inline_modules(code: &str) -> Vec<(usize, Vec<String>)> {
    let b = code.as_bytes();
    let mut out: Vec<(usize, Vec<String>)> = Vec::new();
    let mut open: Vec<(String, i32)> = Vec::new();
    let mut depth = 0i32;
    let mut pending: Option<String> = None;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let word_start = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        if word_start && code[i..].starts_with("mod ") {
            let rest = code[i + 4..].trim_start();
            // (`mod $name {` in a macro's body counts: the expansion is a module.)
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '$')
                .collect();
            let after = rest[name.len()..].trim_start();
            if !name.is_empty() && after.starts_with('{') {
                pending = Some(name);
            }
            i += 4;
            continue;
        }
        if word_start && code[i..].starts_with("macro_rules!") {
            // A macro's body: its `super` paths resolve where it expands, not here.
            pending = Some(MACRO_BODY.to_string());
            i += "macro_rules!".len();
            continue;
        }
        if c == b'{' {
            depth += 1;
            if let Some(name) = pending.take() {
                open.push((name, depth));
                out.push((i, open.iter().map(|(n, _)| n.clone()).collect()));
            }
        } else if c == b'}' {
            if open.last().is_some_and(|(_, d)| *d == depth) {
                open.pop();
                out.push((i, open.iter().map(|(n, _)| n.clone()).collect()));
            }
            depth -= 1;
        }
        i += 1;
    }
    out
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

/// The workspace members' `src` folders, from the root Cargo.toml's `members`.
fn member_sources(root: &Path) -> Vec<PathBuf> {
    let manifest = fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("the workspace manifest lists its members");
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(|m| root.join(m).join("src"))
        .filter(|p| p.is_dir())
        .collect()
}

/// Every module folder of the workspace (relative to its root) that holds more than one module:
/// its files other than the root file, and its subfolders that hold Rust. `src/bin` is skipped:
/// each file there is a crate of its own.
fn module_folders(root: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, top: bool, out: &mut Vec<String>) {
        let mut units = 0;
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                if top && name == "bin" {
                    continue;
                }
                let mut inner = Vec::new();
                rs_files(&p, &mut inner);
                if !inner.is_empty() {
                    units += 1;
                    walk(root, &p, false, out);
                }
            } else if name.ends_with(".rs") && !["mod.rs", "lib.rs", "main.rs"].contains(&&*name) {
                // `x.rs` beside a folder `x/` is that folder's root, one unit with it.
                if !dir.join(name.trim_end_matches(".rs")).is_dir() {
                    units += 1;
                }
            }
        }
        if units > 1 {
            out.push(
                dir.strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
            );
        }
    }
    let mut out = Vec::new();
    for src in member_sources(root) {
        walk(root, &src, true, &mut out);
    }
    out.sort();
    out
}

/// Where a name that is not one of the folder's modules comes from.
#[derive(Debug, PartialEq)]
enum Place {
    /// Re-exported by the root file from this unit.
    Unit(String),
    /// Defined by the root file itself.
    Root,
    /// Imported by the root file from outside the folder (checked where that folder is).
    Outside,
    /// A module the root file declares and the order does not place (reported as such).
    Unplaced,
    /// Neither.
    Unknown,
}

/// A folder's root file (lib.rs or mod.rs): what it re-exports from its units and what it
/// defines.
struct RootFile {
    /// Name (or alias) -> the unit it is re-exported from.
    reexports: BTreeMap<String, String>,
    /// Names the root file imports from outside the folder (`crate::`, `super::`, other crates).
    outside: BTreeSet<String>,
    /// Units re-exported whole (`pub use unit::*`), with their code.
    globs: Vec<(String, String)>,
    /// The root file's code.
    code: String,
}

impl RootFile {
    fn read(dir: &Path, level: &BTreeMap<String, usize>) -> RootFile {
        let file = ["lib.rs", "mod.rs"]
            .iter()
            .map(|f| dir.join(f))
            .find(|p| p.exists())
            .unwrap_or_else(|| dir.with_extension("rs"));
        let code = fs::read_to_string(&file)
            .map(|t| production_code(&t))
            .unwrap_or_default();
        let mut reexports = BTreeMap::new();
        let mut globs = Vec::new();
        let mut outside = BTreeSet::new();
        for stmt in code.split(';') {
            let t = stmt.trim_start();
            let t = t
                .strip_prefix("pub(crate) ")
                .or_else(|| t.strip_prefix("pub(super) "))
                .or_else(|| t.strip_prefix("pub "))
                .unwrap_or(t);
            let Some(tree) = t.strip_prefix("use ") else {
                continue;
            };
            let tree = tree.trim_start();
            let tree = tree.strip_prefix("self::").unwrap_or(tree);
            for path in parse_tree(tree).0 {
                let Some(first) = path.first() else {
                    continue;
                };
                if !level.contains_key(first) {
                    if let Some(last) = path.last() {
                        outside.insert(last.clone());
                    }
                    continue;
                }
                if path.len() == 1 {
                    // `pub use unit::*` (the parser stops at the `*`) or `use unit;`.
                    if tree.contains(&format!("{first}::*")) {
                        let text = unit_code(dir, first);
                        globs.push((first.clone(), text));
                    }
                } else {
                    reexports.insert(path.last().unwrap().clone(), first.clone());
                }
            }
            // `use unit::Name as Alias`: the alias names the same unit.
            for (alias_of, alias) in aliases(tree) {
                if let Some(u) = reexports.get(&alias_of).cloned() {
                    reexports.insert(alias, u);
                } else if outside.contains(&alias_of) {
                    outside.insert(alias);
                }
            }
        }
        RootFile {
            reexports,
            outside,
            globs,
            code,
        }
    }

    fn place(&self, name: &str) -> Place {
        if let Some(u) = self.reexports.get(name) {
            return Place::Unit(u.clone());
        }
        if let Some((u, _)) = self.globs.iter().find(|(_, c)| defines(c, name)) {
            return Place::Unit(u.clone());
        }
        if self.code.lines().any(|l| {
            let t = l.trim_start();
            let t = t
                .strip_prefix("pub(crate) ")
                .or_else(|| t.strip_prefix("pub "))
                .unwrap_or(t);
            t.strip_prefix("mod ")
                .is_some_and(|m| m.trim_end_matches(';').trim() == name)
        }) {
            return Place::Unplaced;
        }
        if defines(&self.code, name) {
            return Place::Root;
        }
        if self.outside.contains(name) {
            return Place::Outside;
        }
        Place::Unknown
    }
}

/// The code of a unit of `dir`: `unit.rs` or `unit/mod.rs`.
fn unit_code(dir: &Path, unit: &str) -> String {
    let f = dir.join(format!("{unit}.rs"));
    let f = if f.exists() {
        f
    } else {
        dir.join(unit).join("mod.rs")
    };
    fs::read_to_string(f)
        .map(|t| production_code(&t))
        .unwrap_or_default()
}

/// `(name, alias)` for each `name as alias` in a use tree.
fn aliases(tree: &str) -> Vec<(String, String)> {
    let words: Vec<&str> = tree
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(3)
        .filter(|w| w[1] == "as")
        .map(|w| (w[0].to_string(), w[2].to_string()))
        .collect()
}

/// Whether `code` defines an item called `name` (or a `macro_rules!` of that name).
fn defines(code: &str, name: &str) -> bool {
    const KINDS: [&str; 10] = [
        "struct",
        "enum",
        "fn",
        "trait",
        "type",
        "const",
        "static",
        "union",
        "mod",
        "macro_rules!",
    ];
    code.lines().any(|l| {
        let words: Vec<&str> = l
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '!'))
            .filter(|w| !w.is_empty())
            .collect();
        words
            .windows(2)
            .any(|w| KINDS.contains(&w[0]) && w[1] == name)
    })
}

#[test]
fn module_folders_are_found() {
    let folders = module_folders(&workspace_root());
    for want in ["rzmq-core/src", "rzmq-core/src/zmtp", "rzmq-core/src/pipe"] {
        assert!(folders.iter().any(|f| f == want), "{want} in {folders:?}");
    }
    assert!(!folders.iter().any(|f| f.ends_with("/bin")));
}

#[test]
fn root_file_places_reexports_and_items() {
    let code = production_code(
        "mod a;\nmod b;\npub use a::{Thing, Other as Alias};\npub(crate) use self::b::Bee;\nuse crate::x::Far;\npub struct Hub;\n",
    );
    let level: BTreeMap<String, usize> = [("a".to_string(), 0), ("b".to_string(), 1)].into();
    let tmp = std::env::temp_dir().join(format!("layers-root-{}", std::process::id()));
    fs::create_dir_all(&tmp).unwrap();
    fs::write(tmp.join("mod.rs"), &code).unwrap();
    let root = RootFile::read(&tmp, &level);
    fs::remove_dir_all(&tmp).unwrap();
    assert_eq!(root.place("Thing"), Place::Unit("a".into()));
    assert_eq!(root.place("Alias"), Place::Unit("a".into()));
    assert_eq!(root.place("Bee"), Place::Unit("b".into()));
    assert_eq!(root.place("Hub"), Place::Root);
    assert_eq!(root.place("Far"), Place::Outside);
    assert_eq!(root.place("Nothing"), Place::Unknown);
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
    // Every folder of more than one module has its order: none is skipped.
    let stated: BTreeSet<&str> = orders.iter().map(|o| o.dir.as_str()).collect();
    for dir in module_folders(&root) {
        if !stated.contains(dir.as_str()) {
            problems.push(format!(
                "{dir}: a folder of more than one module with no import-order block in \
                 docs/ARCHITECTURE.md"
            ));
        }
    }
    let root_dir = root.clone();
    for order in &orders {
        let dir = root.join(&order.dir);
        let crate_src = {
            let s = order.dir.find("/src").map(|i| &order.dir[..i + 4]).unwrap();
            root.join(s)
        };
        let root = RootFile::read(&dir, &order.level);
        let root_level = order
            .level
            .get("mod")
            .or_else(|| order.level.get("lib"))
            .copied();
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
                prev_cfg_test = is_test_cfg(t) || (prev_cfg_test && t.starts_with("#["));
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
                let (theirs, other) = match order.level.get(&other) {
                    Some(&l) => (l, other),
                    // Not a module: a name the folder's root file (lib.rs / mod.rs) re-exports
                    // or defines.
                    None => match root.place(&other) {
                        Place::Unit(u) if u == unit => continue,
                        Place::Unit(u) => match order.level.get(&u) {
                            Some(&l) => (l, u),
                            None => {
                                problems.push(format!(
                                    "{}: `{}` uses `{}`, re-exported from `{u}`, which the \
                                     order does not place",
                                    order.dir,
                                    f.strip_prefix(&root_dir).unwrap().display(),
                                    r.join("::"),
                                ));
                                continue;
                            }
                        },
                        // An item of the root file: where the order places the root, checked
                        // against it; unplaced, the root is the hub its files extend (the
                        // type they implement), beneath all of them.
                        Place::Root => match root_level {
                            Some(l) => (l, "mod".to_string()),
                            None => continue,
                        },
                        Place::Outside | Place::Unplaced => continue,
                        Place::Unknown => {
                            problems.push(format!(
                                "{}: `{}` uses `{}`, which is no module, re-export or item \
                                 of the folder that the order could place",
                                order.dir,
                                f.strip_prefix(&root_dir).unwrap().display(),
                                r.join("::"),
                            ));
                            continue;
                        }
                    },
                };
                if theirs >= mine {
                    problems.push(format!(
                        "{}: `{}` ({}) uses `{}` ({}), which is {}",
                        order.dir,
                        f.strip_prefix(&root_dir).unwrap().display(),
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
