//! Tool calls in pages, shown as what they did: a file written as a code block in the
//! file's language, an edit as a diff, a shell command as a command block, a read or a
//! search as its paths and pattern; any other tool's arguments as pretty JSON.
//!
//! Invariants:
//! - A call opens with its line as before (`Tool call`, the tool's name, its call id), then
//!   a `<p class="what">` saying what it did, then its blocks; nothing of the arguments is
//!   left out: what the view of a known tool does not show is listed after it as
//!   `arguments`, and a call whose arguments have another shape than the tool's usual one
//!   is shown as the JSON of an unknown tool.
//! - Every block is labelled (`<figcaption>`: `file`, `diff`, `command`, `arguments`),
//!   and one past [`super::markdown`]'s limits is folded (`<details>`) with its size.
//! - Every string is escaped for where it goes ([`text`], [`code_block`]); names and paths
//!   are shown on one line ([`one_line`]); nothing of the arguments becomes a URL or a
//!   class.

use std::borrow::Cow;

use similar::TextDiff;

use super::escape::text;
use super::highlight::{code_block, language_of_path};
use super::markdown::{cut_point, line_count};
use super::{one_line, thousands};
use crate::json::{self, Object, Value};

/// Edits whose old and new text together pass this are shown as the two texts, not a diff,
/// so that a page renders in bounded time.
const DIFF_MAX_BYTES: usize = 256 * 1024;

/// Appends the HTML of a tool call (see the module invariants).
pub fn push_tool_call(out: &mut String, name: &str, id: Option<&str>, arguments: Option<&Value>) {
    out.push_str("<div class=\"tool\"><p><span class=\"kind\">Tool call</span> <code>");
    out.push_str(&text(name));
    out.push_str("</code>");
    if let Some(id) = id {
        out.push_str(" · <code>");
        out.push_str(&text(id));
        out.push_str("</code>");
    }
    out.push_str("</p>\n");
    let arguments = arguments.map(Value::expanded);
    match arguments.as_deref() {
        None => {}
        Some(Value::Object(args)) => {
            let mut call = Call {
                out,
                args,
                shown: Vec::new(),
            };
            if call.known(name) {
                call.rest();
            } else {
                call.block(
                    "arguments",
                    &json::to_pretty(&Value::Object(args.clone())),
                    "json",
                );
            }
        }
        Some(other) => {
            let mut call = Call {
                out,
                args: &Object::new(),
                shown: Vec::new(),
            };
            call.block("arguments", &json::to_pretty(other), "json");
        }
    }
    out.push_str("</div>\n");
}

struct Call<'a> {
    out: &'a mut String,
    args: &'a Object,
    /// The arguments the view has shown.
    shown: Vec<&'static str>,
}

impl<'a> Call<'a> {
    /// Shows a call of a tool the views know, with its usual arguments; `false` (having
    /// written nothing) for any other.
    fn known(&mut self, name: &str) -> bool {
        match name {
            "bash" => {
                let Some(command) = self.string("command") else {
                    return false;
                };
                let cwd = self.string("cwd");
                self.what("ran a command", cwd.as_deref().map(|cwd| ("in", cwd)), None);
                // Shown plain: the shell's syntax costs the highlighter four times the rest
                // of a page (docs/benchmarks-archive.md, "HTML pages").
                self.block("command", &command, "");
            }
            "write" => {
                let (Some(path), Some(content)) = (self.string("path"), self.string("content"))
                else {
                    return false;
                };
                let lines = line_count(&content);
                let unit = if lines == 1 { "line" } else { "lines" };
                let lines = format!("{} {unit}", thousands(lines as u64));
                self.what("wrote", Some(("", &path)), Some(&lines));
                self.block("file", &content, language_of_path(&path));
            }
            "edit" => return self.edit(),
            "read" => {
                let Some(path) = self.string("path") else {
                    return false;
                };
                let from = self.number("offset").map(|n| format!("from line {n}"));
                let count = self.number("limit").map(|n| format!("{n} lines"));
                let range: Vec<String> = from.into_iter().chain(count).collect();
                let range = (!range.is_empty()).then(|| range.join(", "));
                self.what("read", Some(("", &path)), range.as_deref());
            }
            "search" | "grep" | "find" | "glob" | "ls" => return self.lookup(name),
            _ => return false,
        }
        true
    }

    /// An edit: `path` with `oldText` and `newText` (one edit) or `edits` (several), as a
    /// diff; `input` (edit sections naming their own paths) as written.
    fn edit(&mut self) -> bool {
        if let Some(input) = self.string("input") {
            self.what("edited files", None, None);
            self.block("edit", &input, "");
            return true;
        }
        let Some(path) = self.string("path") else {
            return false;
        };
        let mut pairs = Vec::new();
        match (
            self.string("oldText"),
            self.args.get("edits").map(Value::expanded),
        ) {
            (Some(old), None) => {
                self.shown.push("newText");
                pairs.push((
                    old.into_owned(),
                    self.string("newText").unwrap_or_default().into_owned(),
                ));
            }
            (None, Some(edits)) => {
                let Some(edits) = edits.as_array() else {
                    return false;
                };
                for edit in edits.iter().map(Value::expanded) {
                    let Some(e) = edit.as_object() else {
                        return false;
                    };
                    let old = e.get("oldText").and_then(Value::as_js_string);
                    let new = e.get("newText").and_then(Value::as_js_string);
                    let (Some(old), Some(new)) = (old, new) else {
                        return false;
                    };
                    pairs.push((
                        old.to_string_lossy().into_owned(),
                        new.to_string_lossy().into_owned(),
                    ));
                }
                self.shown.push("edits");
            }
            _ => return false,
        }
        self.what("edited", Some(("", &path)), None);
        for (old, new) in &pairs {
            if old.len() + new.len() > DIFF_MAX_BYTES {
                self.block("old text", old, language_of_path(&path));
                self.block("new text", new, language_of_path(&path));
                continue;
            }
            let name = one_line(&path, usize::MAX);
            let diff = TextDiff::from_lines(old.as_str(), new.as_str())
                .unified_diff()
                .context_radius(3)
                .missing_newline_hint(false)
                .header(&name, &name)
                .to_string();
            self.block("diff", &diff, "diff");
        }
        true
    }

    /// A search or a listing: its pattern and the paths it looked in.
    fn lookup(&mut self, name: &str) -> bool {
        let pattern = self.string("pattern");
        let paths = match self.args.get("paths").map(Value::expanded) {
            Some(paths) => match paths.as_array() {
                Some(list) if list.iter().all(|p| p.as_js_string().is_some()) => {
                    self.shown.push("paths");
                    list.iter()
                        .filter_map(Value::as_js_string)
                        .map(|p| one_line(&p.to_string_lossy(), usize::MAX))
                        .collect()
                }
                _ => return false,
            },
            None => self
                .string("path")
                .map(|p| vec![one_line(&p, usize::MAX)])
                .unwrap_or_default(),
        };
        if pattern.is_none() && paths.is_empty() {
            return false;
        }
        let verb = match name {
            "search" | "grep" => "searched",
            "ls" => "listed",
            _ => "looked for files",
        };
        let mut what = format!("<p class=\"what\">{verb}");
        if let Some(pattern) = pattern {
            what.push_str(&format!(
                " for <code>{}</code>",
                text(&one_line(&pattern, usize::MAX))
            ));
        }
        if !paths.is_empty() {
            let paths: Vec<String> = paths
                .iter()
                .map(|p| format!("<code>{}</code>", text(p)))
                .collect();
            what.push_str(&format!(" in {}", paths.join(", ")));
        }
        what.push_str("</p>\n");
        self.out.push_str(&what);
        true
    }

    /// A string argument, as text (lone surrogates as U+FFFD), marked as shown.
    fn string(&mut self, key: &'static str) -> Option<Cow<'a, str>> {
        let args: &'a Object = self.args;
        let value = args.get(key)?.as_js_string()?;
        self.shown.push(key);
        Some(value.to_string_lossy())
    }

    /// A number argument, as JavaScript writes it, marked as shown.
    fn number(&mut self, key: &'static str) -> Option<String> {
        let n = self.args.get(key)?.as_f64()?;
        self.shown.push(key);
        Some(json::format_js_number(n))
    }

    /// The line saying what the call did: `verb`, then `word <code>object</code>`, then a
    /// note.
    fn what(&mut self, verb: &str, object: Option<(&str, &str)>, note: Option<&str>) {
        self.out.push_str("<p class=\"what\">");
        self.out.push_str(verb);
        if let Some((word, object)) = object {
            if !word.is_empty() {
                self.out.push(' ');
                self.out.push_str(word);
            }
            self.out.push_str(" <code>");
            self.out.push_str(&text(&one_line(object, usize::MAX)));
            self.out.push_str("</code>");
        }
        if let Some(note) = note {
            self.out.push_str(" <span class=\"note\">");
            self.out.push_str(&text(note));
            self.out.push_str("</span>");
        }
        self.out.push_str("</p>\n");
    }

    /// A labelled block of code, folded with its size when long.
    fn block(&mut self, label: &str, body: &str, lang: &str) {
        let folded = cut_point(body) < body.len();
        if folded {
            self.out.push_str(&format!(
                "<details><summary>{label}: {} bytes, {} lines</summary>\n",
                thousands(body.len() as u64),
                thousands(line_count(body) as u64)
            ));
        }
        self.out.push_str("<figure><figcaption>");
        self.out.push_str(label);
        self.out.push_str("</figcaption>");
        self.out
            .push_str(&code_block(body, lang, &label.replace(' ', "-")));
        self.out.push_str("</figure>\n");
        if folded {
            self.out.push_str("</details>\n");
        }
    }

    /// What the view did not show, as `arguments`.
    fn rest(&mut self) {
        let mut rest = Object::new();
        for (key, value) in self.args.iter() {
            if !key.as_str().is_some_and(|k| self.shown.contains(&k)) {
                rest.insert(&key.to_string_lossy(), value.clone());
            }
        }
        if !rest.is_empty() {
            let rest = json::to_pretty(&Value::Object(rest));
            self.block("arguments", &rest, "json");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text of `html`, its tags left out.
    fn visible(html: &str) -> String {
        html.split('<')
            .map(|part| part.split_once('>').map_or(part, |(_, text)| text))
            .collect()
    }

    fn call(name: &str, arguments: &str) -> String {
        let mut out = String::new();
        let args = json::parse(arguments).unwrap();
        push_tool_call(&mut out, name, Some("c1"), Some(&args));
        out
    }

    #[test]
    fn known_tools_are_shown_as_what_they_did() {
        let write = call("write", r#"{"path":"src/a.rs","content":"fn a() {}\n"}"#);
        assert!(
            write.contains(
                "<p class=\"what\">wrote <code>src/a.rs</code> <span class=\"note\">1 line</span></p>"
            ),
            "{write}"
        );
        assert!(
            write.contains(
                "<figcaption>file</figcaption><pre class=\"code file\"><code><span class=\"hl-"
            ),
            "{write}"
        );
        assert!(!write.contains("arguments"), "nothing left over: {write}");

        let edit = call(
            "edit",
            r#"{"path":"a.txt","oldText":"one\ntwo\n","newText":"one\nthree\n"}"#,
        );
        assert!(
            edit.contains("<p class=\"what\">edited <code>a.txt</code></p>"),
            "{edit}"
        );
        assert!(edit.contains("<figcaption>diff</figcaption>"), "{edit}");
        assert!(
            visible(&edit).contains(
                "-two
+three
"
            ),
            "{edit}"
        );
        let edits = call(
            "edit",
            r#"{"path":"a","edits":[{"oldText":"x","newText":"y"},{"oldText":"p","newText":"q"}]}"#,
        );
        assert_eq!(
            edits.matches("<figcaption>diff</figcaption>").count(),
            2,
            "{edits}"
        );

        let bash = call("bash", r#"{"command":"cd /w && ls\necho hi","timeout":60}"#);
        assert!(
            bash.contains("<p class=\"what\">ran a command</p>"),
            "{bash}"
        );
        assert!(bash.contains("<figcaption>command</figcaption>"), "{bash}");
        assert!(
            visible(&bash).contains(
                "cd /w &amp;&amp; ls
echo hi"
            ),
            "{bash}"
        );
        // What the view does not show is listed as arguments.
        assert!(
            bash.contains("<figcaption>arguments</figcaption>"),
            "{bash}"
        );
        assert!(
            visible(&bash)
                .replace("&quot;", "\"")
                .contains("\"timeout\": 60"),
            "{bash}"
        );

        let read = call("read", r#"{"path":"b.md","offset":10,"limit":5}"#);
        assert!(
            read.contains("read <code>b.md</code>") && read.contains("from line 10, 5 lines"),
            "{read}"
        );
        let search = call("search", r#"{"pattern":"fn main","paths":["src","tests"]}"#);
        assert!(
            search.contains(
                "searched for <code>fn main</code> in <code>src</code>, <code>tests</code>"
            ),
            "{search}"
        );
    }

    #[test]
    fn other_tools_and_other_shapes_are_pretty_json() {
        let other = call("mcp_thing", r#"{"q":"<b>"}"#);
        assert!(
            other.contains("<figcaption>arguments</figcaption>"),
            "{other}"
        );
        assert!(
            other.contains("&lt;b&gt;") && !other.contains("<b>"),
            "{other}"
        );
        // A known tool with arguments of another shape.
        let odd = call("write", r#"{"path":3,"content":"x"}"#);
        assert!(!odd.contains("class=\"what\""), "{odd}");
        assert!(odd.contains("<figcaption>arguments</figcaption>"), "{odd}");
        let odd = call("edit", r#"{"path":"a","edits":[{"oldText":1}]}"#);
        assert!(
            !odd.contains("class=\"what\"") && odd.contains("oldText"),
            "{odd}"
        );
        let list = call("bash", r#"["ls"]"#);
        assert!(
            list.contains("<figcaption>arguments</figcaption>"),
            "{list}"
        );
    }

    #[test]
    fn long_blocks_are_folded_with_their_size() {
        let content = "line\n".repeat(500);
        let args = format!(
            r#"{{"path":"x.txt","content":{}}}"#,
            json::to_compact(&Value::string(content.as_str()))
        );
        let write = call("write", &args);
        assert!(
            write.contains("<details><summary>file: 2,500 bytes, 500 lines</summary>"),
            "{write}"
        );
    }
}
