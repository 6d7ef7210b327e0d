//! Filler text for generated sessions: prose, source code, shell output, file paths and
//! base64-looking blobs.
//!
//! Every generator appends about the requested number of bytes to a `String` (it stops at
//! the first line or sentence boundary past the target), drawing only from the given random
//! generator, so the output is a pure function of the generator state. The text mixes in what real transcripts
//! carry and the JSON writer has to escape: quotes, backslashes, tabs, newlines, an
//! occasional terminal colour escape (a control character) and non-ASCII characters.

use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::RngExt;

const WORDS: &[&str] = &[
    "the",
    "session",
    "entry",
    "file",
    "module",
    "function",
    "test",
    "error",
    "value",
    "type",
    "branch",
    "leaf",
    "parent",
    "context",
    "message",
    "tool",
    "result",
    "output",
    "input",
    "config",
    "cache",
    "index",
    "record",
    "writer",
    "reader",
    "buffer",
    "line",
    "path",
    "directory",
    "state",
    "model",
    "provider",
    "summary",
    "compaction",
    "token",
    "usage",
    "cost",
    "request",
    "response",
    "stream",
    "event",
    "handler",
    "callback",
    "promise",
    "async",
    "await",
    "return",
    "import",
    "export",
    "interface",
    "struct",
    "field",
    "method",
    "refactor",
    "rename",
    "extract",
    "inline",
    "split",
    "merge",
    "check",
    "verify",
    "update",
    "create",
    "delete",
    "append",
    "replace",
    "parse",
    "serialize",
    "migrate",
    "load",
    "save",
    "and",
    "or",
    "but",
    "so",
    "then",
    "because",
    "when",
    "while",
    "after",
    "before",
    "with",
    "without",
    "into",
    "from",
    "for",
    "of",
    "in",
    "on",
    "at",
    "by",
    "to",
    "is",
    "are",
    "was",
    "it",
    "this",
    "that",
    "we",
    "I",
    "you",
    "should",
    "could",
    "would",
    "must",
    "can",
    "will",
    "now",
    "next",
    "first",
    "last",
    "only",
    "also",
    "still",
    "already",
    "again",
    "instead",
    "small",
    "large",
    "new",
    "old",
    "same",
    "other",
    "each",
    "every",
    "some",
    "all",
    "none",
    "missing",
    "broken",
    "fixed",
    "passing",
    "failing",
    "slow",
    "fast",
    "simple",
    "careful",
];

const IDENTS: &[&str] = &[
    "session",
    "entries",
    "leafId",
    "parentId",
    "byId",
    "header",
    "writer",
    "options",
    "result",
    "record",
    "payload",
    "message",
    "content",
    "toolCall",
    "summary",
    "index",
    "buffer",
    "path",
    "cwd",
    "state",
    "model",
    "provider",
    "usage",
    "tokens",
    "cost",
    "err",
    "value",
    "key",
    "item",
    "node",
    "children",
    "label",
    "timestamp",
    "blob",
    "hash",
    "line",
];

const FILES: &[&str] = &[
    "src/session/session-manager.ts",
    "src/session/messages.ts",
    "src/session/blob-store.ts",
    "src/core/agent-session.ts",
    "src/modes/interactive-mode.ts",
    "src/modes/rpc-mode.ts",
    "src/tools/bash.ts",
    "src/tools/edit.ts",
    "src/utils/stream.ts",
    "packages/ai/src/providers/anthropic.ts",
    "packages/ai/src/providers/openai-responses.ts",
    "packages/tui/src/components/editor.ts",
    "docs/session.md",
    "README.md",
    "package.json",
    "test/session-manager.test.ts",
];

const ACCENTED: &[&str] = &["é", "—", "→", "✅", "…", "“", "”", "ü", "日本", "✗", "·"];

fn pick<'a>(rng: &mut SmallRng, list: &[&'a str]) -> &'a str {
    list.choose(rng).copied().unwrap_or("")
}

/// A repository-relative file path.
pub fn file_path(rng: &mut SmallRng) -> &'static str {
    pick(rng, FILES)
}

/// An identifier as found in source code.
pub fn ident(rng: &mut SmallRng) -> &'static str {
    pick(rng, IDENTS)
}

/// One sentence of a few to a dozen words, capitalised, sometimes with inline code or a
/// non-ASCII character.
fn sentence(rng: &mut SmallRng, out: &mut String) {
    let n = rng.random_range(4..14);
    for i in 0..n {
        if i > 0 {
            out.push(' ');
        }
        let roll = rng.random_range(0..100);
        if roll < 4 {
            out.push('`');
            out.push_str(ident(rng));
            out.push_str("()`");
        } else if roll < 6 {
            out.push_str(pick(rng, ACCENTED));
        } else if roll < 8 {
            out.push('"');
            out.push_str(pick(rng, WORDS));
            out.push('"');
        } else {
            let word = pick(rng, WORDS);
            if i == 0 {
                let mut chars = word.chars();
                if let Some(c) = chars.next() {
                    out.extend(c.to_uppercase());
                    out.push_str(chars.as_str());
                }
            } else {
                out.push_str(word);
            }
        }
    }
    out.push_str(pick(rng, &[".", ".", ".", "?", ":", "!"]));
}

/// Markdown-flavoured prose: paragraphs, headings, bullet lists and the odd table row.
pub fn prose(rng: &mut SmallRng, min_bytes: usize, out: &mut String) {
    let target = out.len() + min_bytes;
    while out.len() < target {
        match rng.random_range(0..10) {
            0 => {
                out.push_str("## ");
                sentence(rng, out);
                out.push_str("\n\n");
            }
            1 | 2 => {
                for _ in 0..rng.random_range(2..5) {
                    out.push_str("- ");
                    sentence(rng, out);
                    out.push('\n');
                }
                out.push('\n');
            }
            3 => {
                out.push_str("| ");
                out.push_str(ident(rng));
                out.push_str(" | ");
                out.push_str(file_path(rng));
                out.push_str(" | ✅ |\n\n");
            }
            _ => {
                for _ in 0..rng.random_range(1..4) {
                    sentence(rng, out);
                    out.push(' ');
                }
                out.pop();
                out.push_str("\n\n");
            }
        }
    }
    while out.ends_with('\n') {
        out.pop();
    }
}

/// A short prose snippet of about `min_bytes` bytes, without paragraph structure.
pub fn sentences(rng: &mut SmallRng, min_bytes: usize, out: &mut String) {
    let target = out.len() + min_bytes;
    while out.len() < target {
        sentence(rng, out);
        out.push(' ');
    }
    out.pop();
}

/// TypeScript-looking source code with tab indentation and string literals.
pub fn code(rng: &mut SmallRng, min_bytes: usize, out: &mut String) {
    let target = out.len() + min_bytes;
    let mut depth = 0usize;
    while out.len() < target {
        for _ in 0..depth {
            out.push('\t');
        }
        let (a, b) = (ident(rng), ident(rng));
        match rng.random_range(0..12) {
            0 if depth == 0 => {
                out.push_str("import { ");
                out.push_str(a);
                out.push_str(" } from \"./");
                out.push_str(b);
                out.push_str(".js\";");
            }
            1 | 2 if depth < 4 => {
                out.push_str("export function ");
                out.push_str(a);
                out.push('(');
                out.push_str(b);
                out.push_str(": string): void {");
                depth += 1;
            }
            3 if depth < 4 => {
                out.push_str("if (");
                out.push_str(a);
                out.push_str(" === undefined) {");
                depth += 1;
            }
            4 | 5 if depth > 0 => {
                depth -= 1;
                out.pop();
                out.push('}');
            }
            6 => {
                out.push_str("// ");
                sentence(rng, out);
            }
            7 => {
                out.push_str("throw new Error(`Entry ${");
                out.push_str(a);
                out.push_str("} not found in \\\"");
                out.push_str(b);
                out.push_str("\\\"`);");
            }
            8 => {}
            _ => {
                out.push_str("const ");
                out.push_str(a);
                out.push_str(" = ");
                out.push_str(b);
                out.push('.');
                out.push_str(ident(rng));
                out.push_str("(\"");
                out.push_str(pick(rng, WORDS));
                out.push_str("\", ");
                out.push_str(&rng.random_range(0..4096).to_string());
                out.push_str(");");
            }
        }
        out.push('\n');
    }
    for level in (0..depth).rev() {
        for _ in 0..level {
            out.push('\t');
        }
        out.push_str("}\n");
    }
}

/// Source code as the read tool shows it: numbered lines.
pub fn numbered_code(rng: &mut SmallRng, min_bytes: usize, out: &mut String) {
    let mut body = String::with_capacity(min_bytes + 256);
    code(rng, min_bytes, &mut body);
    let start = rng.random_range(1..400);
    for (i, line) in body.lines().enumerate() {
        out.push_str(&format!("{:>5}\t", start + i));
        out.push_str(line);
        out.push('\n');
    }
}

/// Shell output: listings, test runner lines (some coloured), compiler diagnostics.
pub fn shell_output(rng: &mut SmallRng, min_bytes: usize, out: &mut String) {
    let target = out.len() + min_bytes;
    while out.len() < target {
        match rng.random_range(0..8) {
            0 => {
                out.push_str("\u{1b}[32m✓\u{1b}[0m ");
                out.push_str(file_path(rng));
                out.push_str(&format!(" ({} ms)", rng.random_range(1..900)));
            }
            1 => {
                out.push_str("\u{1b}[31m✗\u{1b}[0m ");
                out.push_str(ident(rng));
                out.push_str(" > ");
                sentence(rng, out);
            }
            2 => {
                out.push_str(file_path(rng));
                out.push_str(&format!(
                    ":{}:{} - error TS2339: Property '{}' does not exist on type '{}'.",
                    rng.random_range(1..900),
                    rng.random_range(1..80),
                    ident(rng),
                    ident(rng)
                ));
            }
            3 => {
                out.push_str(&format!(
                    "-rw-r--r--  1 dev  staff  {:>7} Feb 16 10:{:02} {}",
                    rng.random_range(100..90_000),
                    rng.random_range(0..60),
                    file_path(rng)
                ));
            }
            _ => {
                out.push_str(file_path(rng));
                out.push(':');
                out.push_str(&rng.random_range(1..2000).to_string());
                out.push_str(":\t");
                out.push_str(ident(rng));
                out.push_str(" = \"");
                out.push_str(pick(rng, WORDS));
                out.push_str("\";");
            }
        }
        out.push('\n');
    }
}

/// A unified diff of a few hunks.
pub fn diff(rng: &mut SmallRng, min_bytes: usize, out: &mut String) {
    let target = out.len() + min_bytes;
    while out.len() < target {
        let line = rng.random_range(1..900);
        out.push_str(&format!("      ...\n{line:>5}   "));
        out.push_str(ident(rng));
        out.push_str("();\n");
        out.push_str(&format!(
            "-{:>4}   const {} = {};\n",
            line + 1,
            ident(rng),
            ident(rng)
        ));
        out.push_str(&format!(
            "+{:>4}   const {} = {};\n",
            line + 1,
            ident(rng),
            ident(rng)
        ));
    }
}

/// A base64-alphabet string of exactly `len` characters (no padding).
pub fn base64ish(rng: &mut SmallRng, len: usize, out: &mut String) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    out.reserve(len);
    for _ in 0..len {
        out.push(ALPHABET[rng.random_range(0..64)] as char);
    }
}

/// Standard padded base64 of `bytes`.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> shift & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// An alphanumeric string of `len` characters (tool call ids, response ids).
pub fn alnum(rng: &mut SmallRng, len: usize, out: &mut String) {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    for _ in 0..len {
        out.push(ALPHABET[rng.random_range(0..ALPHABET.len())] as char);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn base64_matches_the_standard_encoding() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foob"), "Zm9vYg==");
        assert_eq!(base64(&[0xff, 0xfe, 0x00]), "//4A");
    }

    #[test]
    fn generators_reach_their_size_and_are_deterministic() {
        type Gen = fn(&mut SmallRng, usize, &mut String);
        let gens: [Gen; 6] = [prose, sentences, code, numbered_code, shell_output, diff];
        for (i, g) in gens.into_iter().enumerate() {
            let run = || {
                let mut rng = SmallRng::seed_from_u64(i as u64);
                let mut s = String::new();
                g(&mut rng, 5000, &mut s);
                s
            };
            let (a, b) = (run(), run());
            assert!(a.len() >= 4900, "generator {i} made {} bytes", a.len());
            assert!(a.len() < 7000, "generator {i} made {} bytes", a.len());
            assert_eq!(a, b);
        }
    }
}
