//! The shape of the code, as docs/ARCHITECTURE.md states it: inside every crate the modules
//! import one another without a cycle, no file is over 800 lines and no function over 100
//! lines, tests and the platform bindings aside.
//!
//! The sources are read with a small lexer that blanks comments, strings and character
//! literals, so that braces and paths inside them count for nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The source directories of the workspace's crates.
const CRATES: &[&str] = &[
    "crates/json/src",
    "crates/engine/src",
    "crates/search/src",
    "crates/vfs/src",
    "crates/corpus/src",
    "platform/fuse/src",
    "platform/dokan/src",
    "platform/log/src",
    "src",
];

/// Files that bind a platform's API call by call, exempt from the length limit.
const BINDINGS: &[&str] = &["crates/engine/src/storage/sys/windows.rs"];

const MAX_FILE_LINES: usize = 800;
const MAX_FN_LINES: usize = 100;

/// A source file with its comments, strings and character literals blanked (newlines kept)
/// and its test modules (`#[cfg(test)] mod … { … }`) removed.
struct Source {
    code: String,
}

impl Source {
    fn read(path: &Path) -> Source {
        let text = fs::read_to_string(path).unwrap();
        Source {
            code: without_test_modules(&blank(&text)),
        }
    }

    fn lines(&self) -> usize {
        self.code.trim_end().lines().count()
    }
}

/// `text` with comments, strings and character literals replaced by spaces.
fn blank(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let keep_newline = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            loop {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(keep_newline(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r' && matches!(next, Some('"') | Some('#')) && !ident_before(&chars, i) {
            // A raw string: r"…", r#"…"#, …
            let mut j = i + 1;
            while chars.get(j) == Some(&'#') {
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            out.extend(std::iter::repeat_n(' ', j - i + 1));
            i = j + 1;
            loop {
                if chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
                    out.extend(std::iter::repeat_n(' ', hashes + 1));
                    i += hashes + 1;
                    break;
                }
                out.push(keep_newline(chars[i]));
                i += 1;
            }
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                out.push(keep_newline(chars[i]));
                i += 1;
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && is_char_literal(&chars, i) {
            out.push(' ');
            i += 1;
            while chars[i] != '\'' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                out.push(' ');
                i += 1;
            }
            out.push(' ');
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// Whether the quote at `i` opens a character literal (`'a'`, `'\n'`, `'\u{1b}'`) rather
/// than a lifetime (`'a`, `'static`).
fn is_char_literal(chars: &[char], i: usize) -> bool {
    match chars.get(i + 1) {
        Some('\\') => true,
        Some(_) => chars.get(i + 2) == Some(&'\''),
        None => false,
    }
}

/// The index of the brace that closes the one at `open`.
fn closing_brace(code: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (i, &b) in code.iter().enumerate().skip(open) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    panic!("an unclosed brace");
}

/// `code` without the blocks of `#[cfg(test)] mod name { … }`.
fn without_test_modules(code: &str) -> String {
    let mut out = code.to_owned();
    while let Some(at) = out.find("#[cfg(test)]") {
        let after = &out[at + "#[cfg(test)]".len()..];
        let rest = after.trim_start();
        // Other attributes may sit between the cfg and the module.
        let rest_start = out.len() - rest.len();
        let mut item = rest_start;
        while out[item..].starts_with("#[") {
            item += out[item..].find(']').unwrap() + 1;
            item += out[item..].len() - out[item..].trim_start().len();
        }
        let is_module = out[item..].starts_with("mod ") && {
            let head = &out[item..];
            let brace = head.find('{');
            let semi = head.find(';');
            matches!((brace, semi), (Some(b), Some(s)) if b < s)
                || (brace.is_some() && semi.is_none())
        };
        if !is_module {
            // Not a test module: keep it, and look past this attribute.
            out.replace_range(at..at + "#[cfg(test)]".len(), &" ".repeat(12));
            continue;
        }
        let open = item + out[item..].find('{').unwrap();
        let close = closing_brace(out.as_bytes(), open);
        let newlines = out[at..=close].matches('\n').count();
        out.replace_range(at..=close, &"\n".repeat(newlines));
    }
    out
}

/// The functions of `code` longer than `max` lines: (name, first line, lines).
fn long_functions(code: &str, max: usize) -> Vec<(String, usize, usize)> {
    let bytes = code.as_bytes();
    let mut long = Vec::new();
    let mut from = 0;
    while let Some(found) = code[from..].find("fn ") {
        let at = from + found;
        from = at + 3;
        if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
            continue;
        }
        let name: String = code[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue; // `fn(…)` types
        }
        let head = &code[at..];
        let (Some(brace), semi) = (head.find('{'), head.find(';')) else {
            continue;
        };
        if semi.is_some_and(|s| s < brace) {
            continue; // a declaration without a body
        }
        let close = closing_brace(bytes, at + brace);
        let first = code[..at].matches('\n').count() + 1;
        let lines = code[at..=close].matches('\n').count() + 1;
        if lines > max {
            long.push((name, first, lines));
        }
    }
    long
}

/// Every `.rs` file under `dir`, with its module path in the crate (`a::b`; the crate root
/// is ``). Files named `tests.rs` are test modules and left out.
fn modules(dir: &Path) -> BTreeMap<String, PathBuf> {
    let mut found = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(dir).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            if parts.last().is_some_and(|p| p == "tests") {
                continue;
            }
            found.insert(parts.join("::"), path);
        }
    }
    found
}

/// The paths `code` names after `crate::` or `super::`, resolved to module paths of the
/// crate; each `{…}` group of a `use` is expanded one level.
fn named_paths(code: &str, module: &str) -> Vec<Vec<String>> {
    let parent: Vec<String> = {
        let mut parts: Vec<String> = module
            .split("::")
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect();
        // `super` of module a::b is a, whether it is `a/b.rs` or `a/b/mod.rs`.
        parts.pop();
        parts
    };
    let mut paths = Vec::new();
    for (prefix, base) in [("crate::", Vec::new()), ("super::", parent)] {
        let mut from = 0;
        while let Some(found) = code[from..].find(prefix) {
            let at = from + found;
            from = at + prefix.len();
            let bytes = code.as_bytes();
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
                continue;
            }
            let rest = &code[from..];
            let path: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let mut segments: Vec<String> = base.clone();
            segments.extend(
                path.split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned),
            );
            if rest[path.len()..].starts_with('{') {
                let close = closing_brace(rest.as_bytes(), path.len());
                for item in rest[path.len() + 1..close].split(',') {
                    let head: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !head.is_empty() && head != "self" {
                        let mut with = segments.clone();
                        with.push(head);
                        paths.push(with);
                    }
                }
            }
            paths.push(segments);
        }
    }
    paths
}

/// The module edges of the crate at `dir`: who imports whom (a module's own ancestors and
/// descendants aside).
fn import_edges(dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules(dir);
    let mut edges = BTreeMap::new();
    for (module, path) in &mods {
        let code = Source::read(path).code;
        let mut to = BTreeSet::new();
        for segments in named_paths(&code, module) {
            let target = (1..=segments.len())
                .rev()
                .map(|k| segments[..k].join("::"))
                .find(|m| mods.contains_key(m));
            let Some(target) = target else { continue };
            let related = target == *module
                || module.starts_with(&format!("{target}::"))
                || target.starts_with(&format!("{module}::"));
            if !related {
                to.insert(target);
            }
        }
        edges.insert(module.clone(), to);
    }
    edges
}

/// A cycle among `edges`, if there is one.
fn a_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        at: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        marks.insert(at.to_owned(), Mark::Open);
        path.push(at.to_owned());
        for next in edges.get(at).into_iter().flatten() {
            match marks.get(next) {
                Some(Mark::Open) => {
                    let start = path.iter().position(|p| p == next).unwrap();
                    let mut cycle = path[start..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(Mark::Done) => {}
                None => {
                    if let Some(cycle) = visit(next, edges, marks, path) {
                        return Some(cycle);
                    }
                }
            }
        }
        path.pop();
        marks.insert(at.to_owned(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for start in edges.keys() {
        if !marks.contains_key(start) {
            if let Some(cycle) = visit(start, edges, &mut marks, &mut Vec::new()) {
                return Some(cycle);
            }
        }
    }
    None
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn no_crate_has_an_import_cycle() {
    let mut cycles = Vec::new();
    for dir in CRATES {
        if let Some(cycle) = a_cycle(&import_edges(&root().join(dir))) {
            cycles.push(format!("{dir}: {}", cycle.join(" → ")));
        }
    }
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

#[test]
fn no_file_or_function_is_too_long() {
    let mut long = Vec::new();
    for dir in CRATES {
        for path in modules(&root().join(dir)).values() {
            let rel = path
                .strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let source = Source::read(path);
            if source.lines() > MAX_FILE_LINES && !BINDINGS.contains(&rel.as_str()) {
                long.push(format!("{rel}: {} lines", source.lines()));
            }
            for (name, line, lines) in long_functions(&source.code, MAX_FN_LINES) {
                long.push(format!("{rel}:{line}: fn {name}, {lines} lines"));
            }
        }
    }
    assert!(long.is_empty(), "too long:\n{}", long.join("\n"));
}

/// The engine's layers as `docs/ARCHITECTURE.md` lists them ("Inside the engine"): each
/// numbered line's backquoted module names, bottom layer first.
fn engine_layers(architecture: &str) -> Vec<Vec<String>> {
    let start = architecture
        .find("### Inside the engine")
        .expect("ARCHITECTURE.md lists the engine's layers");
    architecture[start..]
        .lines()
        .skip_while(|line| !line.starts_with("1. "))
        .take_while(|line| {
            line.split_once(". ")
                .is_some_and(|(n, _)| n.parse::<u32>().is_ok())
        })
        .map(|line| {
            line.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

/// The uses of a lower layer's module of one of a higher layer, and the modules missing
/// from the layers or in more than one, among the top-level modules of `edges`.
fn layer_breaches(
    edges: &BTreeMap<String, BTreeSet<String>>,
    layers: &[Vec<String>],
) -> Vec<String> {
    let top = |m: &str| m.split("::").next().unwrap_or_default().to_owned();
    let mut layer_of = BTreeMap::new();
    let mut breaches = Vec::new();
    for (n, layer) in layers.iter().enumerate() {
        for module in layer {
            if layer_of.insert(module.clone(), n).is_some() {
                breaches.push(format!("{module} is in two layers"));
            }
        }
    }
    for (module, to) in edges {
        let from = top(module);
        if from.is_empty() {
            continue;
        }
        let Some(&low) = layer_of.get(&from) else {
            breaches.push(format!("{from} is in no layer"));
            continue;
        };
        for target in to.iter().map(|t| top(t)) {
            match layer_of.get(&target) {
                Some(&high) if high > low => breaches.push(format!(
                    "{module} (layer {}) uses {target} (layer {})",
                    low + 1,
                    high + 1
                )),
                None if !target.is_empty() => breaches.push(format!("{target} is in no layer")),
                _ => {}
            }
        }
    }
    breaches.sort();
    breaches.dedup();
    breaches
}

#[test]
fn the_engine_keeps_the_layers_its_architecture_lists() {
    let architecture = fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let layers = engine_layers(&architecture);
    assert!(layers.len() > 3, "layers read: {layers:?}");
    let edges = import_edges(&root().join("crates/engine/src"));
    let breaches = layer_breaches(&edges, &layers);
    assert!(breaches.is_empty(), "{}", breaches.join("\n"));
}

#[test]
fn the_checks_find_what_they_look_for() {
    // The lexer blanks what is not code, so a brace in a string or a comment is no brace.
    let code =
        blank("fn a() { let s = \"{\"; let c = '{'; /* { */ } // {\nfn b<'x>(v: &'x str) {}");
    assert_eq!(code.matches('{').count(), 2);
    assert_eq!(code.matches('}').count(), 2);
    assert!(code.contains("fn b<'x>(v: &'x str)"));
    // A long function is found, and a test module's functions are not counted.
    let body = "    x();\n".repeat(120);
    let long = format!(
        "fn long() {{\n{body}}}\n#[cfg(test)]\nmod tests {{\n    fn t() {{\n{body}    }}\n}}\n"
    );
    let found = long_functions(&without_test_modules(&blank(&long)), MAX_FN_LINES);
    assert_eq!(found, vec![("long".to_owned(), 1, 122)]);
    // A cycle is found, and a chain is none.
    let edges = |pairs: &[(&str, &str)]| {
        let mut map: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in pairs {
            map.entry(a.to_string()).or_default().insert(b.to_string());
            map.entry(b.to_string()).or_default();
        }
        map
    };
    assert!(a_cycle(&edges(&[("a", "b"), ("b", "c")])).is_none());
    assert_eq!(
        a_cycle(&edges(&[("a", "b"), ("b", "c"), ("c", "a")])),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    // `use super::{x, y::z}` names both modules.
    let named = named_paths("use super::{x, y::Z};", "m");
    assert!(named.contains(&vec!["x".to_owned()]));
    assert!(named.contains(&vec!["y".to_owned()]));
    // A use upwards and a module in no layer are breaches; one downwards is none.
    let layers = engine_layers(
        "### Inside the engine\n\ntext\n\n1. low: `a`, `a2`\n2. high: `b`\n\nafter `c`",
    );
    assert_eq!(layers, vec![vec!["a", "a2"], vec!["b"]]);
    assert!(layer_breaches(&edges(&[("b", "a::x"), ("a", "a2")]), &layers).is_empty());
    assert_eq!(
        layer_breaches(&edges(&[("a::y", "b"), ("c", "a")]), &layers),
        ["a::y (layer 1) uses b (layer 2)", "c is in no layer"]
    );
}

/// Every `.rs` file under `tests/integration/` is compiled: declared as a module by
/// `main.rs` (or by the `mod.rs` of its directory), so no test is written and never run.
#[test]
fn every_test_file_is_compiled() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integration");
    let mut missing = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        let parent = if dir == root { "main.rs" } else { "mod.rs" };
        let declared = fs::read_to_string(dir.join(parent)).unwrap_or_default();
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_owned();
            let module = if path.is_dir() {
                dirs.push(path.clone());
                name
            } else if let Some(stem) = name.strip_suffix(".rs") {
                if stem == "main" || stem == "mod" {
                    continue;
                }
                stem.to_owned()
            } else {
                continue;
            };
            let declared_here = declared.lines().any(|line| {
                let line = line.trim();
                line == format!("mod {module};") || line == format!("pub mod {module};")
            });
            if !declared_here {
                missing.push(path.strip_prefix(&root).unwrap().display().to_string());
            }
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "test files no module declares: {missing:?}"
    );
}
